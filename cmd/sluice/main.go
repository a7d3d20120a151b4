// Command sluice is overload protection for Go services: run "sluice help"
// for its subcommands. The work is done in internal/cli.
package main

import (
	"os"

	"github.com/sluicehq/sluice/cmd/sluice/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
