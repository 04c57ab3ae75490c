package fleet

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// member is one cluster of the fleet: its goroutine builds the cluster's
// factory from its Config, binds every resource of the fleet to it, and
// rebuilds it when the Config changes (a generation each time).
type member struct {
	fleet *Fleet
	name  string
	// after is the done channel of a member of the same name that left
	// just before this one joined: this one starts once that one's
	// deletes are delivered, so the cluster's events stay in order.
	after <-chan struct{}
	done  chan struct{}
	// wake is signalled (buffered 1) when the Config changes or the
	// member must stop.
	wake chan struct{}

	mu sync.Mutex // guards every field below
	// cfg and cfgErr are the source's latest word on the cluster.
	cfg    *rest.Config
	cfgErr error
	// stopping: the member must stop; leaving: and deliver deletes (it
	// left the source) rather than only stop (Shutdown).
	stopping, leaving bool
	// factory is the current generation's (nil before the first, or when
	// the Config was unusable: then err says why).
	factory *dynamicinformer.Factory
	genCtx  context.Context
	err     error
	gen     int
	since   time.Time
	// bindings are the current generation's informers, by resource.
	bindings map[*Resource]*binding
	// crdChanged is closed and replaced when a CRD of the cluster changes
	// (names being resolved wait on it); crdHandle is the informer that
	// sees them, made when a name first needs it.
	crdChanged chan struct{}
	crdHandle  *dynamicinformer.InformerHandle
}

func newMember(f *Fleet, c Cluster) *member {
	m := &member{fleet: f, name: c.Name, done: make(chan struct{}), wake: make(chan struct{}, 1),
		cfg: c.Config, cfgErr: c.Err, bindings: map[*Resource]*binding{}, since: time.Now()}
	if old, ok := f.leaving[c.Name]; ok {
		m.after = old.done
	}
	return m
}

func (m *member) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// reconfigure takes the source's latest Cluster; a different Config
// pointer (or error) rebuilds the factory.
func (m *member) reconfigure(c Cluster) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Config == m.cfg && errText(c.Err) == errText(m.cfgErr) {
		return
	}
	m.cfg, m.cfgErr = c.Config, c.Err
	m.signal()
}

// stop ends the member; leaving also delivers a delete per object.
func (m *member) stop(leaving bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopping, m.leaving = true, leaving
	m.signal()
}

// run is the member's goroutine.
func (m *member) run(ctx context.Context) {
	defer m.fleet.wg.Done()
	defer func() {
		m.fleet.mu.Lock()
		if m.fleet.leaving[m.name] == m {
			delete(m.fleet.leaving, m.name)
		}
		m.fleet.mu.Unlock()
		close(m.done)
	}()
	if m.after != nil {
		select {
		case <-m.after:
		case <-ctx.Done():
			return
		}
	}
	var prev map[*Resource]*binding // the stopped generation's, for the next to diff against
	for {
		m.mu.Lock()
		if m.stopping {
			m.mu.Unlock()
			m.finish(prev)
			return
		}
		cfg, cfgErr := m.cfg, m.cfgErr
		m.mu.Unlock()

		genCtx, genCancel := context.WithCancel(ctx)
		fac, err := m.newFactory(cfg, cfgErr)
		m.install(genCtx, fac, err, prev)
		if fac != nil {
			fac.Start(genCtx)
		}
		m.fleet.notify()

		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.stopping = true
			m.mu.Unlock()
		case <-m.wake:
		}
		m.mu.Lock()
		stopping := m.stopping
		m.mu.Unlock()
		if !stopping {
			m.fleet.log.V(1).Info("cluster configuration changed: rebuilding its clients", "cluster", m.name)
		}
		genCancel()
		if fac != nil {
			fac.Shutdown()
		}
		prev = m.detach()
		if stopping {
			m.finish(prev)
			return
		}
	}
}

// newFactory builds the generation's factory (nil and why when it cannot).
func (m *member) newFactory(cfg *rest.Config, cfgErr error) (*dynamicinformer.Factory, error) {
	if cfgErr != nil {
		return nil, &ClusterError{Cluster: m.name, Err: cfgErr}
	}
	if cfg == nil {
		return nil, &ClusterError{Cluster: m.name, Err: fmt.Errorf("%w: no client configuration", ErrClusterConfig)}
	}
	opts := m.fleet.opts.Factory
	log := opts.Logger
	if log.GetSink() == nil {
		log = m.fleet.opts.Logger
	}
	if log.GetSink() != nil {
		opts.Logger = log.WithValues("cluster", m.name)
	}
	if opts.CacheDir != "" {
		opts.CacheDir = filepath.Join(opts.CacheDir, url.PathEscape(m.name))
	}
	fac, err := dynamicinformer.NewForConfig(rest.CopyConfig(cfg), opts)
	if err != nil {
		return nil, &ClusterError{Cluster: m.name, Err: fmt.Errorf("%w: %w", ErrClusterConfig, err)}
	}
	fac.OnStatusChange(func(dynamicinformer.Status) { m.fleet.notify() })
	return fac, nil
}

// install makes fac the current generation and binds every resource of the
// fleet to it (prev: the previous generation's bindings, stopped).
func (m *member) install(genCtx context.Context, fac *dynamicinformer.Factory, err error, prev map[*Resource]*binding) {
	m.mu.Lock()
	m.factory, m.genCtx, m.err = fac, genCtx, err
	m.gen++
	m.since = time.Now()
	m.crdChanged, m.crdHandle = make(chan struct{}), nil
	carried := make([]*binding, 0, len(prev))
	for r, old := range prev {
		if !r.isReleased() {
			b := newBinding(m, r, fac, old)
			m.bindings[r] = b
			carried = append(carried, b)
		}
	}
	m.mu.Unlock()
	for _, b := range carried {
		b.start(genCtx)
	}
	for _, r := range m.fleet.resourcesSnapshot() {
		m.bind(r) // the others (no-op for those carried)
	}
}

// bind gives r an informer in the current generation (no-op if it has one,
// or before the first generation: install binds it then).
func (m *member) bind(r *Resource) {
	m.mu.Lock()
	if m.genCtx == nil || m.stopping || r.isReleased() {
		m.mu.Unlock()
		return
	}
	if _, ok := m.bindings[r]; ok {
		m.mu.Unlock()
		return
	}
	b := newBinding(m, r, m.factory, nil)
	m.bindings[r] = b
	ctx := m.genCtx
	m.mu.Unlock()
	b.start(ctx)
}

// unbind releases r's informer (Resource.Release).
func (m *member) unbind(r *Resource) {
	m.mu.Lock()
	b := m.bindings[r]
	delete(m.bindings, r)
	m.mu.Unlock()
	if b != nil {
		b.release()
	}
}

func (m *member) binding(r *Resource) *binding {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bindings[r]
}

// detach takes the stopped generation's bindings.
func (m *member) detach() map[*Resource]*binding {
	m.mu.Lock()
	defer m.mu.Unlock()
	bs := m.bindings
	m.bindings = map[*Resource]*binding{}
	m.factory, m.genCtx = nil, nil
	return bs
}

// finish delivers, for a member that left, a delete per object to every
// handler.
func (m *member) finish(last map[*Resource]*binding) {
	m.mu.Lock()
	leaving := m.leaving
	m.mu.Unlock()
	if !leaving {
		return
	}
	for _, b := range last {
		b.leave()
	}
	m.fleet.log.V(1).Info("cluster left", "cluster", m.name, "resources", len(last))
}

// crdSignal returns a channel closed at the next change of a CRD of the
// cluster, starting the CRD informer that sees them if needed (nil: no
// factory).
func (m *member) crdSignal() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.factory == nil {
		return nil
	}
	if m.crdHandle == nil {
		h := m.factory.ForResource(crdGVR, dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true}))
		poke := func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			close(m.crdChanged)
			m.crdChanged = make(chan struct{})
		}
		_, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
		})
		if err != nil {
			return m.crdChanged
		}
		m.crdHandle = h
	}
	return m.crdChanged
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// clientErr is why the cluster has no clients (nil when it has).
func (m *member) clientErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
