package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// Options configure Start. The zero value is usable.
type Options struct {
	// ExtraFlags are appended to the kube-apiserver flags. The defaults
	// enforce RBAC (the admin config is system:masters, so it is allowed
	// everything) and disable the ServiceAccount admission plugin.
	ExtraFlags []string
	// Logf receives the control plane's own progress lines. Nil discards them.
	Logf func(format string, args ...any)
	// StartTimeout bounds Start. Zero means 3 minutes.
	StartTimeout time.Duration
}

// ControlPlane is a running etcd and kube-apiserver in this process.
// Its methods are safe for concurrent use, except that Stop and
// RestartAPIServer must not race with each other.
type ControlPlane struct {
	opts Options
	tb   *processTB

	etcd       *embed.Etcd
	etcdClient *clientv3.Client
	etcdDir    string
	storage    *storagebackend.Config

	proxy *Proxy

	proxiesMu sync.Mutex          // guards proxies
	proxies   map[*Proxy]struct{} // private proxies (NewProxy), open

	// tokenFile holds a static admin token (group system:masters) that
	// every API server start accepts, so clients survive restarts (the
	// loopback token changes with each start).
	tokenFile string

	mu     sync.Mutex // guards server and direct
	server kubeapiservertesting.TestServer
	direct *rest.Config
}

// DefaultFlags are the kube-apiserver flags every ControlPlane starts with.
var DefaultFlags = []string{
	"--authorization-mode=RBAC",
	"--disable-admission-plugins=ServiceAccount",
}

// Start brings up an embedded etcd and a kube-apiserver on loopback and
// returns once the API server answers /healthz and the default namespace
// exists. Call Stop when done.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	cp = &ControlPlane{opts: opts, tb: &processTB{name: "controlplane", logf: opts.Logf}}
	defer func() {
		if err != nil {
			cp.Stop()
			cp = nil
		}
	}()
	if err := cp.startEtcd(ctx); err != nil {
		return cp, fmt.Errorf("start etcd: %w", err)
	}
	cp.storage = storagebackend.NewDefaultConfig("/registry", nil)
	cp.storage.Transport.ServerList = []string{cp.etcd.Clients[0].Addr().String()}
	cp.storage.Transport.ServerList[0] = "http://" + cp.storage.Transport.ServerList[0]
	tf, err := os.CreateTemp("", "controlplane-tokens-*.csv")
	if err != nil {
		return cp, err
	}
	if _, err := tf.WriteString(adminToken + ",informerkit-admin,informerkit-admin-uid,\"system:masters\"\n"); err != nil {
		return cp, err
	}
	_ = tf.Close()
	cp.tokenFile = tf.Name()
	if err := cp.startAPIServer(); err != nil {
		return cp, fmt.Errorf("start kube-apiserver: %w", err)
	}
	p, err := newProxy(cp.backendAddr())
	if err != nil {
		return cp, fmt.Errorf("start proxy: %w", err)
	}
	cp.proxy = p
	return cp, nil
}

func freeLoopbackURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "controlplane-etcd-")
	if err != nil {
		return err
	}
	cp.etcdDir = dir
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.UnsafeNoFsync = true
	clientURL, err := freeLoopbackURL()
	if err != nil {
		return err
	}
	peerURL, err := freeLoopbackURL()
	if err != nil {
		return err
	}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = zapcore.ErrorLevel.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	cp.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case <-ctx.Done():
		return fmt.Errorf("etcd not ready: %w", ctx.Err())
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{clientURL.String()},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return err
	}
	cp.etcdClient = c
	return nil
}

func (cp *ControlPlane) startAPIServer() (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	flags := append(append([]string{}, DefaultFlags...), "--token-auth-file="+cp.tokenFile)
	flags = append(flags, cp.opts.ExtraFlags...)
	srv, err := kubeapiservertesting.StartTestServer(cp.tb,
		&kubeapiservertesting.TestServerInstanceOptions{EnableCertAuth: true, DisableInvariantChecks: true},
		flags, cp.storage)
	if err != nil {
		return err
	}
	direct := rest.CopyConfig(srv.ClientConfig)
	direct.QPS, direct.Burst = 1000, 2000
	cp.mu.Lock()
	cp.server = srv
	cp.direct = direct
	cp.mu.Unlock()
	return nil
}

func (cp *ControlPlane) backendAddr() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	u, err := url.Parse(cp.direct.Host)
	if err != nil {
		return cp.direct.Host
	}
	return u.Host
}

// Stop tears the API server down, then the proxy, then etcd (in that order:
// etcd must outlive the API server's storage layer), and removes temporary
// data. It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	teardown := cp.server.TearDownFn
	cp.server.TearDownFn = nil
	cp.mu.Unlock()
	if teardown != nil {
		teardown()
	}
	if cp.proxy != nil {
		cp.proxy.close()
		cp.proxy = nil
	}
	cp.tb.runCleanups()
	if cp.etcdClient != nil {
		_ = cp.etcdClient.Close()
		cp.etcdClient = nil
	}
	if cp.etcd != nil {
		cp.etcd.Close()
		cp.etcd = nil
	}
	if cp.etcdDir != "" {
		_ = os.RemoveAll(cp.etcdDir)
		cp.etcdDir = ""
	}
	if cp.tokenFile != "" {
		_ = os.Remove(cp.tokenFile)
		cp.tokenFile = ""
	}
}

// adminToken authenticates as informerkit-admin in system:masters on every
// API server start of every ControlPlane (test only: loopback, throwaway).
const adminToken = "informerkit-test-admin-token"

// NewProxy starts a private proxy in front of the API server, for a test
// that injects network faults (CutAll, SetRefuse, SetStalled) between its
// own clients and the server while other tests share the control plane:
// build the clients under test on p.Config or p.UserConfig and only they
// are affected. It follows API server restarts like the shared proxy and
// is closed when t ends.
func (cp *ControlPlane) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	p, err := newProxy(cp.backendAddr())
	if err != nil {
		t.Fatalf("controlplane: private proxy: %v", err)
	}
	cp.proxiesMu.Lock()
	if cp.proxies == nil {
		cp.proxies = map[*Proxy]struct{}{}
	}
	cp.proxies[p] = struct{}{}
	cp.proxiesMu.Unlock()
	t.Cleanup(func() {
		cp.proxiesMu.Lock()
		delete(cp.proxies, p)
		cp.proxiesMu.Unlock()
		p.close()
	})
	return p
}

// allProxies is the shared proxy and every open private one.
func (cp *ControlPlane) allProxies() []*Proxy {
	cp.proxiesMu.Lock()
	defer cp.proxiesMu.Unlock()
	out := []*Proxy{cp.proxy}
	for p := range cp.proxies {
		out = append(out, p)
	}
	return out
}

// Config returns a new admin (system:masters) client config that reaches the
// API server through the proxy. It survives RestartAPIServer: it uses a
// static token every start accepts, and TLS verification is disabled
// because each start has a new self-signed certificate. QPS limits are
// raised for tests.
func (cp *ControlPlane) Config() *rest.Config { return cp.proxy.Config() }

// Config returns a new admin (system:masters) client config that reaches
// the API server through p (see ControlPlane.Config).
func (p *Proxy) Config() *rest.Config {
	return &rest.Config{
		Host:            "https://" + p.Addr(),
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           2000,
	}
}

// DirectConfig returns an admin config that talks to the current API server
// directly (no proxy). It stops working after RestartAPIServer. Use it for
// benchmarks where the proxy's copy would be noise.
func (cp *ControlPlane) DirectConfig() *rest.Config {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return rest.CopyConfig(cp.direct)
}

// UserConfig returns a config that impersonates user (with groups) through
// the admin credentials. RBAC denies such a user everything until roles are
// bound (see Grant).
func (cp *ControlPlane) UserConfig(user string, groups ...string) *rest.Config {
	return cp.proxy.UserConfig(user, groups...)
}

// UserConfig returns a config that impersonates user (with groups) through
// p (see ControlPlane.UserConfig).
func (p *Proxy) UserConfig(user string, groups ...string) *rest.Config {
	cfg := p.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// Proxy is the loopback proxy between Config clients and the API server.
func (cp *ControlPlane) Proxy() *Proxy { return cp.proxy }

// Kube returns a typed clientset on Config.
func (cp *ControlPlane) Kube() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(cp.Config())
}

// Dynamic returns a dynamic client on Config.
func (cp *ControlPlane) Dynamic() dynamic.Interface {
	return dynamic.NewForConfigOrDie(cp.Config())
}

// APIExtensions returns an apiextensions clientset on Config.
func (cp *ControlPlane) APIExtensions() apiextensionsclient.Interface {
	return apiextensionsclient.NewForConfigOrDie(cp.Config())
}

// RestartAPIServer stops the API server and starts a new one on the same
// etcd data. The proxy's address (Config().Host) stays the same; open
// connections are cut. It returns once the new server is healthy.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	return cp.StartAPIServer(ctx)
}

// StopAPIServer stops only the API server; etcd and the proxy keep running
// (new connections to the proxy fail until StartAPIServer).
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	teardown := cp.server.TearDownFn
	cp.server.TearDownFn = nil
	cp.mu.Unlock()
	if teardown == nil {
		return errors.New("controlplane: API server is not running")
	}
	// Cut the proxied connections first, and refuse new ones: the
	// server's graceful shutdown waits (up to its request timeout, a
	// minute) for open watch streams, which end only when their
	// connections do.
	for _, p := range cp.allProxies() {
		p.setDown(true)
		p.CutAll()
	}
	teardown()
	for _, p := range cp.allProxies() {
		p.CutAll()
	}
	return nil
}

// StartAPIServer starts a new API server on the existing etcd after
// StopAPIServer, and points the proxy at it.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- cp.startAPIServer() }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, p := range cp.allProxies() {
		p.setBackend(cp.backendAddr())
		p.setDown(false)
	}
	return nil
}

// Compact compacts etcd's history up to its current revision, so that any
// watch or list that asks for an older resourceVersion gets 410 Gone. It
// returns the revision compacted to.
func (cp *ControlPlane) Compact(ctx context.Context) (int64, error) {
	// A write makes sure the current revision is above anything a client
	// has seen, then compact at it.
	resp, err := cp.etcdClient.Put(ctx, "/controlplane-compaction-marker", time.Now().String())
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := cp.etcdClient.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}

// EtcdClient gives direct access to etcd (for tests that write what the API
// server would refuse, such as objects that fail to decode).
func (cp *ControlPlane) EtcdClient() *clientv3.Client { return cp.etcdClient }
