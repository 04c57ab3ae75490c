package fleet

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigSource is a Source of the contexts of a kubeconfig file: one
// cluster per context, named after the context.
//
// Contexts lists the contexts to use; empty means every context of the file.
// A context listed but absent from the file, or whose configuration cannot
// be built, is a cluster whose Err wraps ErrClusterConfig. With Reload above
// zero the file is read again at that interval: contexts added or removed
// join or leave the fleet, and a context whose configuration changed (its
// cluster, user or their credentials, as written in the file) is given a new
// Config, so the fleet rebuilds its clients. Files the kubeconfig only names
// (a certificate file, a token file) are not watched. Without Reload the file
// is read once. A file that cannot be read or parsed ends Run with an error
// at the first read; at a reload it keeps the last set.
type KubeconfigSource struct {
	// Path is the kubeconfig file.
	Path string
	// Contexts are the contexts to use; empty: all.
	Contexts []string
	// Reload is the interval at which the file is read again; zero: never.
	Reload time.Duration
}

// Run reads the file and reports its contexts until ctx ends.
func (s *KubeconfigSource) Run(ctx context.Context, update func([]Cluster)) error {
	known := map[string]kubeconfigEntry{}
	read := func() error {
		cfg, err := clientcmd.LoadFromFile(s.Path)
		if err != nil {
			return fmt.Errorf("%w: kubeconfig %s: %w", ErrClusterConfig, s.Path, err)
		}
		set, next := kubeconfigClusters(cfg, s.Contexts, known)
		known = next
		update(set)
		return nil
	}
	if err := read(); err != nil {
		return err
	}
	if s.Reload <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.Reload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_ = read() // a file being rewritten: keep the last set
		}
	}
}

// kubeconfigEntry is a context as last read: its minimal kubeconfig (to tell
// a change) and the Config given for it.
type kubeconfigEntry struct {
	raw []byte
	cfg *rest.Config
	err error
}

// kubeconfigClusters builds the clusters of cfg's contexts (names; empty:
// all), keeping the Config of a context whose configuration is unchanged
// from known.
func kubeconfigClusters(cfg *clientcmdapi.Config, names []string, known map[string]kubeconfigEntry) ([]Cluster, map[string]kubeconfigEntry) {
	if len(names) == 0 {
		for n := range cfg.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	next := map[string]kubeconfigEntry{}
	var out []Cluster
	for _, name := range names {
		e := contextEntry(cfg, name)
		if old, ok := known[name]; ok && bytes.Equal(old.raw, e.raw) && e.raw != nil {
			e = old
		}
		next[name] = e
		out = append(out, Cluster{Name: name, Config: e.cfg, Err: e.err})
	}
	return out, next
}

func contextEntry(cfg *clientcmdapi.Config, name string) kubeconfigEntry {
	kctx, ok := cfg.Contexts[name]
	if !ok {
		return kubeconfigEntry{err: fmt.Errorf("%w: no context %q in the kubeconfig", ErrClusterConfig, name)}
	}
	min := clientcmdapi.NewConfig()
	min.Contexts[name] = kctx
	if c, ok := cfg.Clusters[kctx.Cluster]; ok {
		min.Clusters[kctx.Cluster] = c
	}
	if a, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		min.AuthInfos[kctx.AuthInfo] = a
	}
	min.CurrentContext = name
	raw, err := clientcmd.Write(*min)
	if err != nil {
		return kubeconfigEntry{err: fmt.Errorf("%w: context %q: %w", ErrClusterConfig, name, err)}
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return kubeconfigEntry{raw: raw, err: fmt.Errorf("%w: context %q: %w", ErrClusterConfig, name, err)}
	}
	return kubeconfigEntry{raw: raw, cfg: rc}
}
