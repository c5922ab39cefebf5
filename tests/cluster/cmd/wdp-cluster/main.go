// Command wdp-cluster runs the upstream Kubernetes control plane that the
// cluster tests (tests/cluster/README.md) drive the host against: etcd and
// kube-apiserver (tier 1), kube-scheduler and kube-controller-manager
// (tier 2), each the upstream program's own command built from its Go
// module, as subcommands of one binary so their shared packages are
// compiled and linked once. `service-account-key` writes the key the API
// server signs service account tokens with.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wdp-cluster etcd|service-account-key|kube-apiserver|kube-scheduler|kube-controller-manager [flags]")
		os.Exit(2)
	}
	var command *cobra.Command
	switch os.Args[1] {
	case "etcd":
		os.Exit(runEtcd(os.Args[2:]))
	case "service-account-key":
		os.Exit(runServiceAccountKey(os.Args[2:]))
	case "kube-apiserver":
		command = apiserver.NewAPIServerCommand()
	case "kube-scheduler":
		command = scheduler.NewSchedulerCommand()
	case "kube-controller-manager":
		command = controllermanager.NewControllerManagerCommand()
	default:
		fmt.Fprintf(os.Stderr, "wdp-cluster: unknown component %q\n", os.Args[1])
		os.Exit(2)
	}
	command.SetArgs(os.Args[2:])
	os.Exit(cli.Run(command))
}
