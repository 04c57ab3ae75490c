package soaktest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/shardtest"
)

// faultDiskRestart: the process that keeps its caches on disk
// (Options.CacheDir) is stopped — its factory shut down, as at a process
// exit — for a while writers go on, then started again on the same
// directory: it restores what it stored and resumes, or diffs.
const faultDiskRestart = "disk-restart"

// diskProc is that process: one factory with a CacheDir and its
// informers, each a subject of the check. A restart builds a new factory
// and new informers on the same directory, and gives each subject a new
// recorder (a new process's handlers know only what they are told: the
// restored objects as initial adds, then the changes), carrying the
// anomalies over so the report keeps them.
type diskProc struct {
	dir   string
	specs []diskInformer
	// src is the shard source of its sharded informer: one half of the
	// widgets, the other after each restart (a new process whose shard
	// moved while it was down).
	src    *shardtest.ManualSource
	halves [2]shard.Shard

	mu       sync.Mutex // guards f, handles, started, restarts, starts
	f        *dynamicinformer.Factory
	handles  []*dynamicinformer.InformerHandle
	started  bool // restarted since the last tally
	restarts int
	// starts counts, over restarts, how each informer started (resumed,
	// diffed, cold with its reason, removed).
	starts map[string]int
}

// diskInformer is one informer of the disk process.
type diskInformer struct {
	subject *subject
	opts    []dynamicinformer.ResourceOption
}

// startDisk builds the disk process's informers (widgets, whose storage
// version moves; gadgets, deleted, re-created and corrupted; configmaps
// over two namespaces, and widgets of a shard source that moves at each
// restart, both always diffed at a restart), adds them to the subjects
// and starts the process.
func (h *harness) startDisk(ctx context.Context, dir string) error {
	p := &diskProc{dir: dir, starts: map[string]int{}}
	for i := range p.halves {
		s, err := shard.Static(i, 2)
		if err != nil {
			return err
		}
		p.halves[i] = s
	}
	p.src = shardtest.NewManualSource(p.halves[0])
	current := func() shard.Shard { s, _ := p.src.Current(); return s }
	for _, d := range []struct {
		name string
		sc   scope
		opts []dynamicinformer.ResourceOption
	}{
		{"disk-widgets", scope{res: h.widgets}, nil},
		{"disk-gadgets", scope{res: h.gadgets}, nil},
		{"disk-namespaces", scope{res: h.configmaps, namespaces: h.namespaces[:2]},
			[]dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(h.namespaces[:2]...)}},
		{"disk-shard", scope{res: h.widgets, shard: current},
			[]dynamicinformer.ResourceOption{dynamicinformer.WithShardSource(p.src)}},
	} {
		i := len(p.specs)
		s := &subject{name: d.name, scope: d.sc, rec: newRecorder(),
			store:  func() []any { return p.handle(i).Informer().GetStore().List() },
			status: func() dynamicinformer.Status { return p.handle(i).Status() }}
		p.specs = append(p.specs, diskInformer{subject: s, opts: d.opts})
		h.subjects = append(h.subjects, s)
	}
	h.disk = p
	return p.start(ctx)
}

func (p *diskProc) handle(i int) *dynamicinformer.InformerHandle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handles[i]
}

// start builds the factory and its informers on p.dir, registers each
// subject's recorder and starts it.
func (p *diskProc) start(ctx context.Context) error {
	f, err := dynamicinformer.NewForConfig(cp.Config(), dynamicinformer.Options{CacheDir: p.dir})
	if err != nil {
		return err
	}
	var handles []*dynamicinformer.InformerHandle
	for _, d := range p.specs {
		hd := f.ForResource(d.subject.scope.res.gvr, d.opts...)
		if _, err := hd.Informer().AddEventHandler(d.subject.rec); err != nil {
			f.Shutdown()
			return err
		}
		handles = append(handles, hd)
	}
	p.mu.Lock()
	p.f, p.handles = f, handles
	p.mu.Unlock()
	f.Start(ctx)
	return nil
}

// restart stops the process, waits down (writers go on), and starts it
// again on the same directory with new recorders.
func (p *diskProc) restart(ctx context.Context, down time.Duration) error {
	p.mu.Lock()
	f := p.f
	p.mu.Unlock()
	f.Shutdown()
	sleep(ctx, down)
	for _, d := range p.specs {
		old := d.subject.rec
		rec := newRecorder()
		old.mu.Lock()
		rec.anomalies, rec.anomalyLog = old.anomalies, old.anomalyLog
		for k, v := range old.counts {
			rec.counts[k] = v
		}
		old.mu.Unlock()
		d.subject.rec = rec
	}
	p.mu.Lock()
	p.started = true
	p.restarts++
	p.src.Set(p.halves[p.restarts%2])
	p.mu.Unlock()
	return p.start(ctx)
}

// tally counts, after a restart, how each informer started (call it once
// the check converged: every informer has decided).
func (p *diskProc) tally() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return
	}
	p.started = false
	for i, hd := range p.handles {
		st := hd.Status().Disk
		k := fmt.Sprintf("%s %s", p.specs[i].subject.name, st.Start)
		if st.Reason != "" {
			k += " (" + st.Reason + ")"
		}
		p.starts[k]++
	}
}

// summary is the report's line: restarts and how the informers started.
func (p *diskProc) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ks []string
	for k, n := range p.starts {
		ks = append(ks, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(ks)
	return fmt.Sprintf("disk process (CacheDir): %d restarts; starts after them: %s", p.restarts, strings.Join(ks, ", "))
}

func (p *diskProc) shutdown() {
	p.mu.Lock()
	f := p.f
	p.mu.Unlock()
	f.Shutdown()
}
