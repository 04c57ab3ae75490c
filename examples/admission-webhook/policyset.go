package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// policySet is one consistent set of loaded policies and the errors of
// those refused. A request reads one set from start to end.
type policySet struct {
	byName map[string]*policy
	errors []*PolicyError
	// generation counts loads; it starts at 1.
	generation int64
}

// names returns the loaded policies' names, sorted.
func (s *policySet) names() []string {
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// policyLoader loads a directory of policy files into a policySet,
// keeps the caches its policies read, and reloads when a file changes.
type policyLoader struct {
	dir      string
	compiler *compiler
	caches   *caches
	metrics  *metrics
	log      logr.Logger
	// onLoad, if set, is called after each load with the new set (the
	// --install mode updates the webhook configuration from it).
	onLoad func(*policySet)

	current atomic.Pointer[policySet]

	mu sync.Mutex // guards loads (one at a time)
}

// load reads every file of the directory. A policy refused keeps its
// previous version serving if there was one (a file that does not parse
// keeps all its previous policies), so that a bad edit never opens a
// hole; the refusal is reported in the set's errors either way.
func (l *policyLoader) load(ctx context.Context) *policySet {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.current.Load()
	next := &policySet{byName: map[string]*policy{}, generation: 1}
	if prev != nil {
		next.generation = prev.generation + 1
	}
	files, err := policyFiles(l.dir)
	if err != nil {
		next.errors = append(next.errors, &PolicyError{File: l.dir, Err: err})
	}
	keep := func(match func(*policy) bool) {
		if prev == nil {
			return
		}
		for n, p := range prev.byName {
			if match(p) {
				if _, taken := next.byName[n]; !taken {
					next.byName[n] = p
				}
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			next.errors = append(next.errors, &PolicyError{File: f, Err: err})
			keep(func(p *policy) bool { return p.File == f })
			continue
		}
		specs, errs := parsePolicyFile(f, data)
		next.errors = append(next.errors, errs...)
		if len(specs) == 0 && len(errs) > 0 {
			keep(func(p *policy) bool { return p.File == f })
		}
		for _, sp := range specs {
			if other, dup := next.byName[sp.Name]; dup && other.File != "" {
				next.errors = append(next.errors, &PolicyError{File: f, Line: sp.Line, Policy: sp.Name,
					Err: fmt.Errorf("a policy of this name is already loaded from %s:%d", filepath.Base(other.File), other.Line)})
				continue
			}
			p, perr := l.compiler.compile(ctx, sp)
			if perr != nil {
				next.errors = append(next.errors, perr)
				keep(func(p *policy) bool { return p.Name == sp.Name })
				continue
			}
			next.byName[sp.Name] = p
		}
	}
	refs := map[string]schema.GroupVersionResource{}
	for _, p := range next.byName {
		for _, r := range p.lookups {
			if gvr, err := l.compiler.resolve(ctx, r); err == nil {
				refs[r] = gvr
			}
		}
	}
	l.caches.set(refs)
	l.current.Store(next)
	for _, e := range next.errors {
		l.log.Error(e, "policy refused", "file", e.File, "line", e.Line, "policy", e.Policy)
	}
	l.log.Info("policies loaded", "generation", next.generation, "policies", strings.Join(next.names(), ","), "refused", len(next.errors))
	if l.metrics != nil {
		l.metrics.policiesLoaded.Set(float64(len(next.byName)))
		l.metrics.policiesRefused.Set(float64(len(next.errors)))
		l.metrics.reloads.Inc()
	}
	if l.onLoad != nil {
		l.onLoad(next)
	}
	return next
}

// watch reloads the policies when a file of the directory changes, until
// ctx ends. Changes that come close together (an editor's write and
// rename, a ConfigMap volume's symlink swap) make one reload.
func (l *policyLoader) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(l.dir); err != nil {
		return err
	}
	const settle = 100 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if strings.HasPrefix(filepath.Base(ev.Name), ".") && !strings.HasPrefix(filepath.Base(ev.Name), "..data") {
				continue
			}
			timer.Reset(settle)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			l.log.Error(err, "watching the policy directory", "dir", l.dir)
		case <-timer.C:
			l.load(ctx)
		}
	}
}
