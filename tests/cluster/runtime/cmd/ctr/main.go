// Command ctr is containerd's upstream client, used here to import the
// images built for the tests (no registry is reachable).
package main

import (
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/cmd/ctr/app"
)

func main() {
	if err := app.New().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "ctr: %s\n", err)
		os.Exit(1)
	}
}
