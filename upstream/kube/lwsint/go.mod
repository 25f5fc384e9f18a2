module ward.dev/upstream/kube/lwsint

go 1.26.8

require sigs.k8s.io/lws v0.8.0 // indirect
