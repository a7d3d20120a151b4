// Package redisstore shares limits across replicas through Redis.
package redisstore
