package main

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Table requests are throttled by a client of their own, so that a burst
// of rows never delays the contact check or discovery (they share the
// watcher's other client).
const (
	tableQPS   = 20
	tableBurst = 40
)

// restTable sends Table requests with a REST client of its own.
type restTable struct {
	client rest.Interface
}

func newRESTTable(cfg *rest.Config) (*restTable, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = tableQPS, tableBurst
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion() // decodes the server's Status on errors
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &restTable{client: client}, nil
}

// resourcePath is the URL path of a resource's collection in a namespace
// ("" for all namespaces or a cluster-scoped resource).
func resourcePath(gvr schema.GroupVersionResource, namespace string) []string {
	p := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		p = []string{"/api", gvr.Version}
	}
	if namespace != "" {
		p = append(p, "namespaces", namespace)
	}
	return append(p, gvr.Resource)
}

func (r *restTable) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) ([]byte, error) {
	return r.client.Get().AbsPath(append(resourcePath(gvr, namespace), name)...).
		SetHeader("Accept", tableAccept).Do(ctx).Raw()
}

func (r *restTable) list(ctx context.Context, gvr schema.GroupVersionResource, namespace, label, field string, limit int64, cont string) ([]byte, error) {
	req := r.client.Get().AbsPath(resourcePath(gvr, namespace)...).SetHeader("Accept", tableAccept).
		Param("limit", strconv.FormatInt(limit, 10))
	if label != "" {
		req.Param("labelSelector", label)
	}
	if field != "" {
		req.Param("fieldSelector", field)
	}
	if cont != "" {
		req.Param("continue", cont)
	}
	return req.Do(ctx).Raw()
}
