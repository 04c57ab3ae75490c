package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/dynamicinformer"
)

func probeClient(t *testing.T, host string) rest.Interface {
	t.Helper()
	d, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return d.RESTClient()
}

// What a failed connection says, for the failures a user meets: refused,
// a port that accepts and never answers, a server that is not Kubernetes,
// rejected credentials. Each in the user's terms, without client internals.
func TestExplainConnectionErrors(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	notKube := httptest.NewServer(http.NotFoundHandler())
	defer notKube.Close()
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	}))
	defer unauthorized.Close()
	kube := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer kube.Close()

	cases := []struct {
		name, host string
		want       string
	}{
		{"refused", "http://127.0.0.1:1", `cannot reach the API server at http://127.0.0.1:1 (context "c", user "u"): connection refused`},
		{"silent", "http://" + silent.Addr().String(), `no answer from the API server at http://` + silent.Addr().String() + ` (context "c", user "u") within 500ms (--request-timeout)`},
		{"not kubernetes", notKube.URL, `the server at ` + notKube.URL + ` (context "c", user "u") does not look like a Kubernetes API server`},
		{"unauthorized", unauthorized.URL, `the API server at ` + unauthorized.URL + ` (context "c", user "u") rejected the credentials (401 Unauthorized)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := probeServer(context.Background(), probeClient(t, tc.host), 500*time.Millisecond)
			if err == nil {
				t.Fatal("probe succeeded")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("probe took %s with a 500ms timeout", d)
			}
			got := explain(endpoint{Host: tc.host, Context: "c", User: "u"}, err, 500*time.Millisecond)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("explain:\n got %s\nwant %s…", got, tc.want)
			}
			for _, internal := range []string{"discoveryresolver", "?timeout=", "Get \""} {
				if strings.Contains(got, internal) {
					t.Errorf("explain shows %q: %s", internal, got)
				}
			}
		})
	}
	if err := probeServer(context.Background(), probeClient(t, kube.URL), time.Second); err != nil {
		t.Errorf("probe of a Kubernetes-like server: %v", err)
	}
}

// The monitor reports each change of contact once, in order.
func TestContactMonitor(t *testing.T) {
	var mu sync.Mutex
	fail := false
	var changes []string
	m := newContactMonitor(func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("down")
		}
		return nil
	}, 10*time.Millisecond, func(err error, down time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			changes = append(changes, "lost")
		} else {
			changes = append(changes, "restored")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx) }()
	set := func(f bool) {
		mu.Lock()
		fail = f
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	set(false)
	set(true)
	if _, err := m.state(); err == nil {
		t.Error("state reports contact while the probe fails")
	}
	set(false)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(changes, ","); got != "lost,restored" {
		t.Fatalf("changes = %s, want lost,restored", got)
	}
}

// An outage lasts from the last contact: a probe that hangs until its
// timeout before it fails counts in full.
func TestContactOutageFromLastContact(t *testing.T) {
	var down time.Duration
	m := newContactMonitor(nil, time.Hour, func(err error, d time.Duration) {
		if err == nil {
			down = d
		}
	})
	m.record(nil)
	time.Sleep(150 * time.Millisecond) // a probe into a black hole
	m.record(errors.New("timeout"))
	time.Sleep(50 * time.Millisecond)
	m.record(nil)
	if down < 200*time.Millisecond {
		t.Fatalf("outage of %v reported, want at least 200ms (since the last contact)", down)
	}
}

// When an informer notices the lost contact first, the watcher says it as
// the CONTACT line does: the server and the cause, not the informer's
// request (GVR, URL, query).
func TestContactErrFromAnInformer(t *testing.T) {
	w := &watcher{contact: newContactMonitor(nil, time.Hour, nil), ep: endpoint{Host: "https://127.0.0.1:38287"}, cfg: &Config{RequestTimeout: 5 * time.Second}}
	gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:38287/apis/gateway.networking.k8s.io/v1/gateways?allowWatchBookmarks=true",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	st := dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced,
		ContactErr: fmt.Errorf("%s: no contact with the API server: %w", gvr, refused)}
	err := w.contactErr([]dynamicinformer.Status{st})
	if err == nil {
		t.Fatal("no contact error")
	}
	if want := "cannot reach the API server at https://127.0.0.1:38287: connection refused"; err.Error() != want {
		t.Fatalf("contact error %q, want %q", err, want)
	}
}

// The library's own contact error (an *InformerError) whose cause has no
// errno explain knows — the server cut the connection: EOF, bare or
// inside the request's url.Error — is said without the informer's GVR
// (in Go form or any other), URL or query (/readyz, the status table).
func TestContactErrEOFFromAnInformer(t *testing.T) {
	w := &watcher{contact: newContactMonitor(nil, time.Hour, nil), ep: endpoint{Host: "https://127.0.0.1:38287", Context: "e2e", User: "e2e"}, cfg: &Config{RequestTimeout: 5 * time.Second}}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, cause := range []error{
		io.EOF,
		&url.Error{Op: "Get", URL: "https://127.0.0.1:38287/api/v1/configmaps?allowWatchBookmarks=true&watch=true", Err: io.EOF},
	} {
		st := dynamicinformer.Status{GVR: cms, State: dynamicinformer.Syncing,
			ContactErr: &dynamicinformer.InformerError{GVR: cms, Kind: dynamicinformer.ErrNoContact, Err: cause}}
		err := w.contactErr([]dynamicinformer.Status{st})
		if err == nil {
			t.Fatal("no contact error")
		}
		if want := `cannot reach the API server at https://127.0.0.1:38287 (context "e2e", user "e2e"): EOF`; err.Error() != want {
			t.Errorf("contact error %q, want %q", err, want)
		}
	}
}

// The server's description names the kubeconfig user, and the user it
// impersonates when that is another one: a user impersonating itself is
// named once (context "bob", user "bob"), not "bob as bob".
func TestEndpointNamesTheUserOnce(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443"}
	for _, u := range []struct{ name, as string }{{"bob", "bob"}, {"alice", "bob"}, {"carol", ""}} {
		kc.AuthInfos[u.name] = &clientcmdapi.AuthInfo{Token: "t", Impersonate: u.as}
		kc.Contexts[u.name] = &clientcmdapi.Context{Cluster: "c", AuthInfo: u.name}
	}
	kc.CurrentContext = "carol"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ context, want string }{
		{"bob", `https://10.0.0.1:6443 (context "bob", user "bob")`},
		{"alice", `https://10.0.0.1:6443 (context "alice", user "alice as bob")`},
		{"carol", `https://10.0.0.1:6443 (context "carol", user "carol")`},
	} {
		_, ep, err := restConfig(&Config{Kubeconfig: path, Context: tc.context})
		if err != nil {
			t.Fatal(err)
		}
		if got := ep.String(); got != tc.want {
			t.Errorf("context %s: %s, want %s", tc.context, got, tc.want)
		}
	}
	for _, tc := range []struct{ user, as, want string }{
		{"in-cluster service account", "", "in-cluster service account"},
		{"in-cluster service account", "bob", "in-cluster service account as bob"},
		{"", "bob", "as bob"},
	} {
		if got := userText(tc.user, tc.as); got != tc.want {
			t.Errorf("userText(%q, %q) = %q, want %q", tc.user, tc.as, got, tc.want)
		}
	}
}
