module ward.dev/upstream/kube/start

go 1.26
