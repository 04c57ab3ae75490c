module github.com/informerkit/informerkit

go 1.26.0
