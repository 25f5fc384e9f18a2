// Command ward-reconcile runs whereabouts' IP reconciler (pkg/reconciler)
// on a period, with a kubeconfig: what the ip-control-loop's scheduler
// runs in a cluster (its cron schedule, read from a mounted ConfigMap),
// which reaches the API server only through in-cluster configuration.
//
// Written for Ward (issue #62), not part of whereabouts: upstream/build
// compiles it inside the whereabouts v0.6.1 module (go build -overlay), so
// the reconciler is the release's own code. One pass is what
// reconciler.ReconcileIPs does, the kubeconfig instead of in-cluster
// configuration.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/k8snetworkplumbingwg/whereabouts/pkg/reconciler"
)

// timeout is reconciler.ReconcileIPs' own (defaultReconcilerTimeout), in
// seconds.
const timeout = 30

func pass(kubeconfig string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout*time.Second)
	defer cancel()
	looper, err := reconciler.NewReconcileLooperWithKubeconfig(ctx, kubeconfig, timeout)
	if err != nil {
		return err
	}
	freed, err := looper.ReconcileIPPools(ctx)
	if err != nil {
		return err
	}
	if len(freed) > 0 {
		fmt.Fprintf(os.Stderr, "ward-reconcile: freed %v\n", freed)
	}
	return looper.ReconcileOverlappingIPAddresses(ctx)
}

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
