module github.com/informerkit/informerkit/examples/crd-watcher

go 1.26.0
