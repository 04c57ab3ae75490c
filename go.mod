module github.com/informerkit/informerkit

go 1.26.0

require (
	github.com/go-logr/logr v1.4.3 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2 // indirect
)
