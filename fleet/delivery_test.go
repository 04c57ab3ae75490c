package fleet

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

func obj(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// calls records a Handler's calls as "cluster op name@rv".
type calls struct{ got []string }

func (c *calls) OnAdd(cluster string, o any, initial bool) {
	c.got = append(c.got, fmt.Sprintf("%s add %s@%s initial=%v", cluster, o.(*unstructured.Unstructured).GetName(), o.(*unstructured.Unstructured).GetResourceVersion(), initial))
}
func (c *calls) OnUpdate(cluster string, old, o any) {
	c.got = append(c.got, fmt.Sprintf("%s update %s@%s->%s", cluster, old.(*unstructured.Unstructured).GetName(), old.(*unstructured.Unstructured).GetResourceVersion(), o.(*unstructured.Unstructured).GetResourceVersion()))
}
func (c *calls) OnDelete(cluster string, o any) {
	c.got = append(c.got, fmt.Sprintf("%s delete %s@%s", cluster, o.(*unstructured.Unstructured).GetName(), o.(*unstructured.Unstructured).GetResourceVersion()))
}

func store(objs ...*unstructured.Unstructured) toolscache.Store {
	s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		_ = s.Add(o)
	}
	return s
}

// The delivery of a rebuilt cluster turns the new informer's initial list
// into the difference from what the handler held.
func TestDeliveryDiffsAgainstPreviousGeneration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prev   toolscache.Store
		events func(d *delivery)
		want   []string
	}{{
		name: "first generation: plain adds",
		prev: nil,
		events: func(d *delivery) {
			d.OnAdd(obj("a", "1"), true)
			d.OnAdd(obj("b", "2"), false)
		},
		want: []string{"c add a@1 initial=true", "c add b@2 initial=false"},
	}, {
		name: "unchanged objects: nothing",
		prev: store(obj("a", "1"), obj("b", "2")),
		events: func(d *delivery) {
			d.OnAdd(obj("a", "1"), true)
			d.OnAdd(obj("b", "2"), true)
			d.sweep()
		},
		want: nil,
	}, {
		name: "changed, new and gone: update, add, delete at the sweep",
		prev: store(obj("a", "1"), obj("gone", "2")),
		events: func(d *delivery) {
			d.OnAdd(obj("a", "5"), true)
			d.OnAdd(obj("new", "6"), true)
			d.sweep()
			d.sweep() // once only
		},
		want: []string{"c update a@1->5", "c add new@6 initial=true", "c delete gone@2"},
	}, {
		name: "first event after the initial list sweeps before it",
		prev: store(obj("gone", "2")),
		events: func(d *delivery) {
			d.OnAdd(obj("a", "5"), true)
			d.OnUpdate(obj("a", "5"), obj("a", "7"))
		},
		want: []string{"c add a@5 initial=true", "c delete gone@2", "c update a@5->7"},
	}, {
		name: "a non-initial add sweeps first",
		prev: store(obj("gone", "2")),
		events: func(d *delivery) {
			d.OnAdd(obj("gone", "9"), false)
		},
		want: []string{"c delete gone@2", "c add gone@9 initial=false"},
	}, {
		name: "leaving before the new generation synced deletes both",
		prev: store(obj("old", "1"), obj("a", "1")),
		events: func(d *delivery) {
			d.OnAdd(obj("a", "2"), true)
			d.leave(store(obj("a", "2")))
		},
		want: []string{"c update a@1->2", "c delete a@2", "c delete old@1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &calls{}
			tc.events(newDelivery("c", rec, tc.prev))
			if strings.Join(rec.got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(rec.got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestStaticSourceReportsEveryChange(t *testing.T) {
	s := NewStaticSource(nil)
	var sets []string
	update := func(cs []Cluster) {
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		sort.Strings(names)
		sets = append(sets, strings.Join(names, ","))
	}
	ctx, cancel := contextWithCancel()
	done := make(chan error)
	go func() { done <- s.Run(ctx, update) }()
	waitUntil(t, "the initial set", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.watchers) == 1 })
	s.Set("a", nil)
	s.Set("b", nil)
	s.Delete("a")
	s.Delete("a") // absent: no report
	s.Replace(nil)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"", "a", "a,b", "b", ""}
	if strings.Join(sets, "|") != strings.Join(want, "|") {
		t.Errorf("sets %q, want %q", sets, want)
	}
}
