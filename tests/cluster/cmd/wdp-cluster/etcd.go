package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd serves a single-member etcd (the upstream server, embedded) on
// a loopback client URL until SIGTERM or SIGINT.
func runEtcd(args []string) int {
	flags := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "where etcd keeps its data")
	clientURL := flags.String("listen-client-url", "http://127.0.0.1:2379", "the client URL")
	peerURL := flags.String("listen-peer-url", "http://127.0.0.1:2380", "the peer URL")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		return 2
	}
	client, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-client-url: %v\n", err)
		return 2
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-peer-url: %v\n", err)
		return 2
	}
	config := embed.NewConfig()
	config.Dir = *dataDir
	config.ListenClientUrls = []url.URL{*client}
	config.AdvertiseClientUrls = []url.URL{*client}
	config.ListenPeerUrls = []url.URL{*peer}
	config.AdvertisePeerUrls = []url.URL{*peer}
	config.InitialCluster = config.InitialClusterFromName(config.Name)
	config.LogLevel = "warn"
	server, err := embed.StartEtcd(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer server.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-server.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: serving %s\n", client)
	case sig := <-stop:
		fmt.Fprintf(os.Stderr, "etcd: %v before ready\n", sig)
		return 1
	}
	select {
	case err := <-server.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	case <-stop:
		return 0
	}
}
