// Command anchor measures an API server as an envtest suite meets it
// (#63, deliverable 5), through client-go, the client envtest suites use.
// upstream/kube/anchor/run runs it against ward-apiserver and against
// kube-apiserver+etcd in one run and prints the table docs/benchmarks.md
// keeps. Written for Ward; no Kubernetes code.
//
//	anchor -kubeconfig F ready             # poll /readyz every 2 ms until it answers 200
//	anchor -kubeconfig F latency -n 1000   # one write at a time: its round trip, and its watch event's
//	anchor -kubeconfig F fill -n 10000     # that many ConfigMaps of 1 KiB, 8 writers
//
// Each measurement prints one JSON line.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the server's kubeconfig")
	n := flag.Int("n", 1000, "how many writes")
	writers := flag.Int("writers", 8, "concurrent writers (fill)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if *kubeconfig == "" || flag.NArg() != 1 {
		fail(errors.New("usage: anchor -kubeconfig FILE [-n N] [-writers W] ready|latency|fill"))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	// No client-side throttling: the server is what is measured.
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch flag.Arg(0) {
	case "ready":
		err = ready(ctx, cs)
	case "latency":
		err = latency(ctx, cs, *n)
	case "fill":
		err = fill(ctx, cs, *n, *writers)
	default:
		err = fmt.Errorf("unknown measurement %q: ready, latency or fill", flag.Arg(0))
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "anchor:", err)
	os.Exit(1)
}

func ready(ctx context.Context, cs *kubernetes.Clientset) error {
	for {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func namespace(ctx context.Context, cs *kubernetes.Clientset, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// latency creates n ConfigMaps one at a time while watching them: a
// create's round trip, a GET's, and the time from the create's start to
// its ADDED event on the open watch.
func latency(ctx context.Context, cs *kubernetes.Clientset, n int) error {
	const ns = "anchor-latency"
	if err := namespace(ctx, cs, ns); err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	type seen struct {
		name string
		at   time.Time
	}
	added := make(chan seen, 1)
	go func() {
		for e := range w.ResultChan() {
			if cm, ok := e.Object.(*corev1.ConfigMap); ok && e.Type == watch.Added {
				added <- seen{cm.Name, time.Now()}
			}
		}
		close(added)
	}()
	var create, get, event []time.Duration
	for i := range n {
		name := fmt.Sprintf("c-%d", i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
		start := time.Now()
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		create = append(create, time.Since(start))
		for {
			e, ok := <-added
			if !ok {
				return errors.New("the watch ended")
			}
			// Only this create's event (not a ConfigMap someone else wrote).
			if e.name == name {
				event = append(event, e.at.Sub(start))
				break
			}
		}
		start = time.Now()
		if _, err := cms.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		get = append(get, time.Since(start))
	}
	return emit(map[string]any{
		"n": n, "create_us": percentiles(create), "get_us": percentiles(get), "event_us": percentiles(event),
	})
}

// fill creates n ConfigMaps of 1 KiB each with `writers` writers at once.
func fill(ctx context.Context, cs *kubernetes.Clientset, n, writers int) error {
	const ns = "anchor-fill"
	if err := namespace(ctx, cs, ns); err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	value := strings.Repeat("x", 1024)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("f-%d", i)}, Data: map[string]string{"k": value}}
				if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	elapsed := time.Since(start)
	return emit(map[string]any{"n": n, "writers": writers, "seconds": elapsed.Seconds(),
		"per_second": float64(n) / elapsed.Seconds()})
}

// percentiles are p50, p90 and p99, in microseconds.
func percentiles(d []time.Duration) map[string]int64 {
	slices.Sort(d)
	at := func(p int) int64 { return d[(len(d)-1)*p/100].Microseconds() }
	return map[string]int64{"p50": at(50), "p90": at(90), "p99": at(99)}
}

func emit(v map[string]any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}
