// Command ward-kube-start runs the real Kubernetes API server the way
// envtest (controller-runtime's pkg/envtest) runs it: etcd and
// kube-apiserver on loopback, with a serving certificate, a client CA, a
// service-account signing key and an admin user in system:masters; it
// writes a kubeconfig for that user, prints one `ready` line and stays in
// the foreground until it is interrupted, then stops both.
//
// Written for Ward (issue #63), not part of Kubernetes: the oracle that
// ward-apiserver is measured against. upstream/kube/run builds the two
// binaries from their Go modules and starts this with their paths.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	apiserver := flag.String("kube-apiserver", "", "the kube-apiserver binary")
	etcd := flag.String("etcd", "", "the etcd binary")
	dir := flag.String("dir", "", "the folder for certificates, etcd's data and the logs (default: a new temporary one, removed at the end)")
	kubeconfig := flag.String("kubeconfig", "", "where the admin kubeconfig is written (default: <dir>/kubeconfig)")
	port := flag.Int("port", 0, "kube-apiserver's secure port on 127.0.0.1 (0: a free one)")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long each server may take to become ready")
	flag.Parse()
	if err := run(*apiserver, *etcd, *dir, *kubeconfig, *port, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "ward-kube-start: %v\n", err)
		os.Exit(1)
	}
}

func run(apiserver, etcd, dir, kubeconfig string, port int, timeout time.Duration) error {
	for name, bin := range map[string]string{"--kube-apiserver": apiserver, "--etcd": etcd} {
		if bin == "" {
			return fmt.Errorf("%s is required (upstream/kube/run passes it)", name)
		}
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	keep := dir != ""
	if !keep {
		d, err := os.MkdirTemp("", "ward-kube-")
		if err != nil {
			return err
		}
		dir = d
		defer os.RemoveAll(dir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if kubeconfig == "" {
		kubeconfig = filepath.Join(dir, "kubeconfig")
	}
	pki, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	e, err := startProcess(dir, "etcd", etcd,
		"--name=ward",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-cluster=ward=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return err
	}
	defer e.stop()
	if err := e.awaitReady(ctx, timeout, etcdURL+"/health", nil); err != nil {
		return err
	}

	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	a, err := startProcess(dir, "kube-apiserver", apiserver,
		"--allow-privileged=true",
		"--authorization-mode=RBAC",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file="+pki.servingCert,
		"--tls-private-key-file="+pki.servingKey,
		"--client-ca-file="+pki.clientCA,
		"--disable-admission-plugins=ServiceAccount",
		"--etcd-servers="+etcdURL,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer="+server+"/",
		"--service-account-key-file="+pki.saPublic,
		"--service-account-signing-key-file="+pki.saPrivate,
	)
	if err != nil {
		return err
	}
	defer a.stop()
	if err := a.awaitReady(ctx, timeout, server+"/readyz", pki); err != nil {
		return err
	}
	if err := pki.writeKubeconfig(kubeconfig, server); err != nil {
		return err
	}
	fmt.Printf("ready: server=%s kubeconfig=%s dir=%s\n", server, kubeconfig, dir)

	select {
	case <-ctx.Done():
		return nil
	case <-e.exited:
		return fmt.Errorf("etcd exited: %v (its log: %s)", e.err, e.log)
	case <-a.exited:
		return fmt.Errorf("kube-apiserver exited: %v (its log: %s)", a.err, a.log)
	}
}

// errInterrupted is what a wait returns when the starter is interrupted.
var errInterrupted = errors.New("interrupted")
