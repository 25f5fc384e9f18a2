package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/k8snetworkplumbingwg/whereabouts/pkg/reconciler"
)

// timeout is reconciler.ReconcileIPs' own (defaultReconcilerTimeout), in
// seconds.
const timeout = 30

// pass is one reconciler.ReconcileIPs of v0.6.1, with a kubeconfig.
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
