package client

import (
	"strconv"
	"strings"
)

func containsField(err error, field string) bool {
	return err != nil && strings.Contains(err.Error(), field)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func itoa(n int) string { return strconv.Itoa(n) }
