package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a server started by the starter, its output in a log file.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error
}

// startProcess starts bin with args, its output in <dir>/<name>.log.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	log := filepath.Join(dir, name+".log")
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	// Its own process group: an interrupt of the terminal reaches the
	// starter, which then stops the servers in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// awaitReady polls url until it answers 200, the process exits, the
// starter is interrupted, or timeout passes. Over HTTPS it trusts the
// serving CA and presents the admin certificate of pki.
func (p *process) awaitReady(ctx context.Context, timeout time.Duration, url string, pki *pki) error {
	client := &http.Client{Timeout: 5 * time.Second}
	if pki != nil {
		config, err := pki.clientTLS()
		if err != nil {
			return err
		}
		client.Transport = &http.Transport{TLSClientConfig: config}
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%v); its log: %s", p.name, p.err, p.log)
		case <-deadline:
			return fmt.Errorf("%s was not ready after %s (%s: %s); its log: %s", p.name, timeout, url, last, p.log)
		case <-tick.C:
		}
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listened on a moment
// ago (as envtest picks its ports).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tlsConfig is a client configuration that trusts roots and presents cert.
func tlsConfig(roots []byte, cert tls.Certificate) (*tls.Config, error) {
	pool, err := poolOf(roots)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
