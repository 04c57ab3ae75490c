package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// LimitStream names the limit row (no comma: ikbench's -impls splits on
// commas): the initial sync's watch-list request
// (the one informers send: watch, sendInitialEvents, allowWatchBookmarks,
// resourceVersionMatch=NotOlderThan) read to its initial-events-end
// bookmark through client-go's REST client, without decoding anything —
// what the server and the connection cost, which no informer can beat.
const LimitStream = "limit: watch-list stream not decoded"

// LimitImpl is the limit row's implementation. It only measures the
// initial sync (SyncOnly).
func LimitImpl() Impl {
	return Impl{Name: LimitStream, SyncOnly: true, New: newLimit}
}

type limitInstance struct {
	rc     *rest.RESTClient
	r      Resource
	events atomic.Int64 // ADDED events read
	synced atomic.Bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex // guards err
	err    error
}

func newLimit(cfg *rest.Config) (Instance, error) {
	c := dynamic.ConfigFor(cfg)
	c.GroupVersion = nil
	c.APIPath = "/"
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &limitInstance{rc: rc}, nil
}

func (l *limitInstance) Watch(r Resource) error { l.r = r; return nil }

func (l *limitInstance) AddHandler(Resource, Handler) error { return errors.ErrUnsupported }

func (l *limitInstance) Start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.read(ctx); err != nil && ctx.Err() == nil {
			l.errMu.Lock()
			l.err = err
			l.errMu.Unlock()
			l.synced.Store(true) // Len reports the failure
		}
	}()
}

var (
	addedMarker = []byte(`{"type":"ADDED"`)
	endMarker   = []byte(`"` + metav1.InitialEventsAnnotationKey + `":"true"`)
)

// read sends the watch-list request and counts ADDED events until the
// bookmark that ends the initial events.
func (l *limitInstance) read(ctx context.Context) error {
	gv := l.r.GVR.GroupVersion()
	path := "/apis/" + gv.Group + "/" + gv.Version + "/" + l.r.GVR.Resource
	if gv.Group == "" {
		path = "/api/" + gv.Version + "/" + l.r.GVR.Resource
	}
	body, err := l.rc.Get().AbsPath(path).
		Param("watch", "true").Param("sendInitialEvents", "true").Param("allowWatchBookmarks", "true").
		Param("resourceVersionMatch", string(metav1.ResourceVersionMatchNotOlderThan)).Param("resourceVersion", "").
		Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	buf := make([]byte, 256<<10)
	carry := len(endMarker) // bytes kept from the previous read, so markers across reads are seen
	tail := 0
	for {
		n, err := body.Read(buf[tail:])
		if n > 0 {
			window := buf[:tail+n]
			// Events wholly inside the carried tail were counted last time.
			l.events.Add(int64(bytes.Count(window, addedMarker) - bytes.Count(buf[:tail], addedMarker)))
			if bytes.Contains(window, endMarker) {
				l.synced.Store(true)
				return nil
			}
			tail = min(carry, len(window))
			copy(buf, window[len(window)-tail:])
		}
		if err == io.EOF {
			return fmt.Errorf("watch-list stream ended before the initial-events-end bookmark")
		}
		if err != nil {
			return err
		}
	}
}

func (l *limitInstance) Synced() bool { return l.synced.Load() }

// Len is the number of objects read, or -1 if the request failed.
func (l *limitInstance) Len(Resource) int {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.err != nil {
		return -1
	}
	return int(l.events.Load())
}

func (l *limitInstance) Get(Resource, string, string) error { return errors.ErrUnsupported }

func (l *limitInstance) ListNamespace(Resource, string) (int, error) { return 0, errors.ErrUnsupported }

func (l *limitInstance) ListSelector(Resource, labels.Selector) (int, error) {
	return 0, errors.ErrUnsupported
}

func (l *limitInstance) Stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}
