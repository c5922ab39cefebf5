package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// runServiceAccountKey writes a new RSA private key (PKCS #1, PEM) to the
// file named by its one argument: the key kube-apiserver signs service
// account tokens with and checks them against.
func runServiceAccountKey(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: wdp-cluster service-account-key FILE")
		return 2
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		fmt.Fprintf(os.Stderr, "service-account-key: %v\n", err)
		return 1
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if err := os.WriteFile(args[0], pem.EncodeToMemory(block), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "service-account-key: %v\n", err)
		return 1
	}
	return 0
}
