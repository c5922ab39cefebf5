// Command containerd is the upstream containerd daemon (its command and
// built-in plugins, from github.com/containerd/containerd/v2), for the
// cluster tests' real kubelet (tier 3).
package main

import (
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/cmd/containerd/command"

	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
)

func main() {
	if err := command.App().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "containerd: %s\n", err)
		os.Exit(1)
	}
}
