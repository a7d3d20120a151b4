package cli_test

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/cmd/sluice/internal/cli"
)

func ExampleMain() {
	code := cli.Main([]string{"sim", "--plot", "out.pdf", "scenarios/seed003-slowdown.yaml"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// sluice sim: -plot: plot file must end in .svg or .png: "out.pdf"
	// exit 2
}
