// Command ward-reconcile runs whereabouts' IP reconciler (pkg/reconciler)
// on a period, with a kubeconfig: what the ip-control-loop's scheduler
// runs in a cluster (its cron schedule, read from a mounted ConfigMap),
// which reaches the API server only through in-cluster configuration.
//
// Written for Ward (issue #62), not part of whereabouts: upstream/build
// compiles this file and the release's pass-<version>.go inside a copy of
// that release's module, so the reconciler is the release's own code. One
// pass is what reconciler.ReconcileIPs does, with the kubeconfig instead
// of in-cluster configuration; the releases' signatures differ.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the kubeconfig the reconciler uses")
	every := flag.Duration("every", time.Second, "the time between two passes' starts")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "ward-reconcile: no kubeconfig (--kubeconfig or KUBECONFIG)")
		os.Exit(2)
	}
	for {
		start := time.Now()
		if err := pass(*kubeconfig); err != nil {
			fmt.Fprintf(os.Stderr, "ward-reconcile: pass failed: %v\n", err)
		}
		time.Sleep(time.Until(start.Add(*every)))
	}
}
