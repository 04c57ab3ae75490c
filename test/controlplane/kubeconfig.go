package controlplane

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig writes a kubeconfig file (in a directory of t's) for cp's
// admin config, as a program under test reads it with --kubeconfig.
func (cp *ControlPlane) Kubeconfig(t testing.TB) string {
	t.Helper()
	cfg := cp.Config()
	cluster := &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: cfg.Insecure}
	if !cfg.Insecure {
		cluster.CertificateAuthorityData = cfg.CAData
	}
	return WriteKubeconfig(t, cluster, &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile, Token: cfg.BearerToken,
	})
}

// ListCounter counts the lists a program sends through a ListCountingProxy.
type ListCounter struct {
	n atomic.Int64
}

// Load returns the lists counted since the start or the last Reset.
func (c *ListCounter) Load() int64 { return c.n.Load() }

// Reset sets the count to 0.
func (c *ListCounter) Reset() { c.n.Store(0) }

// ListCountingProxy starts a plain-HTTP reverse proxy to cp's API server
// that adds the admin credentials, and writes a kubeconfig for it. The
// proxy counts the lists sent for collection paths ending in suffix
// (for example "/namespaces/ns/configmaps"): a LIST, or a watch-list
// stream (sendInitialEvents=true); a plain watch is not one. Watches
// stream through it. It is closed when t ends.
func (cp *ControlPlane) ListCountingProxy(t testing.TB, suffix string) (kubeconfig string, lists *ListCounter) {
	t.Helper()
	cfg := cp.Config()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	lists = &ListCounter{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.FlushInterval = -1 // watches stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, suffix) {
			q := r.URL.Query()
			if q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
				lists.n.Add(1)
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return WriteKubeconfig(t, &clientcmdapi.Cluster{Server: srv.URL}, &clientcmdapi.AuthInfo{}), lists
}

// WriteKubeconfig writes a kubeconfig file (in a directory of t's) with
// one context, "e2e", of cluster and auth, and returns its path.
func WriteKubeconfig(t testing.TB, cluster *clientcmdapi.Cluster, auth *clientcmdapi.AuthInfo) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = cluster
	kc.AuthInfos["e2e"] = auth
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}
