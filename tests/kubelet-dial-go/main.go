// A manual check, not part of CI (see run.sh): dials a registration socket
// exactly as the kubelet's plugin watcher does (grpc.DialContext(socketPath)
// with no authority) and calls GetInfo and NotifyRegistrationStatus with raw
// protobuf bytes.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

type raw struct{}

func (raw) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (raw) Name() string { return "proto" }

func main() {
	encoding.RegisterCodec(raw{})
	socketPath := os.Args[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := grpc.DialContext(ctx, socketPath, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
	)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println("dialled:", c.Target())
	req := []byte{}
	var resp []byte
	if err := c.Invoke(ctx, "/pluginregistration.Registration/GetInfo", &req, &resp); err != nil {
		fmt.Println("GetInfo:", err)
		os.Exit(1)
	}
	fmt.Printf("GetInfo answered %d bytes: %q\n", len(resp), resp)
	// RegistrationStatus{plugin_registered: false, error: "go client refusal"}
	reason := "refused by the grpc-go client"
	status := append([]byte{0x08, 0x00, 0x12, byte(len(reason))}, reason...)
	if err := c.Invoke(ctx, "/pluginregistration.Registration/NotifyRegistrationStatus", &status, &resp); err != nil {
		fmt.Println("Notify:", err)
		os.Exit(1)
	}
	fmt.Println("NotifyRegistrationStatus answered")
}
