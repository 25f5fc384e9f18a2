package main

import (
	"fmt"
	"os"

	"github.com/k8snetworkplumbingwg/whereabouts/pkg/reconciler"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/storage/kubernetes"
)

// pass is one reconciler.ReconcileIPs of v0.9.2, with a kubeconfig.
func pass(kubeconfig string) error {
	client, err := kubernetes.NewClientViaKubeconfig(kubeconfig)
	if err != nil {
		return err
	}
	looper, err := reconciler.NewReconcileLooperWithClient(client)
	if err != nil {
		return err
	}
	freed, err := looper.ReconcileIPPools()
	if err != nil {
		return err
	}
	if len(freed) > 0 {
		fmt.Fprintf(os.Stderr, "ward-reconcile: freed %v\n", freed)
	}
	return looper.ReconcileOverlappingIPAddresses()
}
