package dynamicinformer

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/shard"
)

// client-go's fake dynamic client ignores the shard selector, as a server
// without the ShardedListAndWatch gate does: three members still hold
// exactly their shards, through later creates and deletes, and say that
// the server did not filter.
func TestShardsWithAServerThatIgnoresTheSelector(t *testing.T) {
	before := runtime.NumGoroutine()
	var objs []kruntime.Object
	for i := 0; i < 60; i++ {
		w := widget("a", fmt.Sprintf("w%02d", i), nil)
		w.SetUID(uuid.NewUUID())
		objs = append(objs, w)
	}
	client := fakeClient(objs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var handles []*InformerHandle
	var shards []shard.Shard
	var factories []*Factory
	for i := 0; i < 3; i++ {
		s, err := shard.Static(i, 3)
		if err != nil {
			t.Fatal(err)
		}
		f := NewSharedInformerFactory(client, 0, WithoutCRDTracking(), WithDefaults(WithShard(s)))
		factories = append(factories, f)
		shards = append(shards, s)
		h := f.ForResource(widgets)
		handles = append(handles, h)
		f.Start(ctx)
	}
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
		checkNoLeaks(t, before)
	}()
	for _, h := range handles {
		waitFor(t, func() bool { return h.Status().State == Synced })
	}
	check := func(want map[types.UID]bool) {
		t.Helper()
		waitFor(t, func() bool {
			n := 0
			for _, h := range handles {
				n += len(h.Informer().GetStore().ListKeys())
			}
			return n == len(want)
		})
		seen := map[types.UID]int{}
		for i, h := range handles {
			for _, o := range h.Informer().GetStore().List() {
				u := o.(*unstructured.Unstructured)
				if !shards[i].Contains(u) {
					t.Fatalf("member %d holds %s, outside its shard", i, u.GetName())
				}
				seen[u.GetUID()]++
			}
		}
		for uid := range want {
			if seen[uid] != 1 {
				t.Fatalf("uid %s held by %d members", uid, seen[uid])
			}
		}
	}
	want := map[types.UID]bool{}
	for _, o := range objs {
		want[o.(*unstructured.Unstructured).GetUID()] = true
	}
	check(want)
	for i, h := range handles {
		st := h.Status()
		if st.Shard != shards[i].Selector() || st.OutsideShard == 0 {
			t.Fatalf("member %d status: shard %q, outside %d (the fake ignores the selector)", i, st.Shard, st.OutsideShard)
		}
	}
	// Creates and deletes after the sync reach the right member only.
	res := client.Resource(widgets).Namespace("a")
	for i := 0; i < 15; i++ {
		w := widget("a", fmt.Sprintf("new%02d", i), nil)
		w.SetUID(uuid.NewUUID())
		if _, err := res.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[w.GetUID()] = true
	}
	for _, o := range objs[:10] {
		u := o.(*unstructured.Unstructured)
		if err := res.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		delete(want, u.GetUID())
	}
	check(want)
}

// Handlers see only the shard: no add, update or delete of another
// member's object.
func TestShardHandlersSeeOnlyTheShard(t *testing.T) {
	in, out := widget("a", "in", nil), widget("a", "out", nil)
	s, _ := shard.Static(0, 2)
	for in.SetUID(uuid.NewUUID()); !s.Contains(in); in.SetUID(uuid.NewUUID()) {
	}
	for out.SetUID(uuid.NewUUID()); s.Contains(out); out.SetUID(uuid.NewUUID()) {
	}
	client := fakeClient(in, out)
	f := NewSharedInformerFactory(client, 0, WithoutCRDTracking())
	defer f.Shutdown()
	h := f.ForResource(widgets, WithShard(s))
	var events []string
	done := make(chan struct{}, 10)
	if _, err := h.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			events = append(events, "add:"+o.(*unstructured.Unstructured).GetName())
			done <- struct{}{}
		},
		UpdateFunc: func(_, o interface{}) {
			events = append(events, "update:"+o.(*unstructured.Unstructured).GetName())
			done <- struct{}{}
		},
		DeleteFunc: func(o interface{}) {
			events = append(events, "delete:"+o.(*unstructured.Unstructured).GetName())
			done <- struct{}{}
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	res := client.Resource(widgets).Namespace("a")
	for _, u := range []*unstructured.Unstructured{out, in} {
		u.SetLabels(map[string]string{"v": "2"})
		if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"out", "in"} {
		if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("events %v", events)
		}
	}
	time.Sleep(100 * time.Millisecond) // an event of "out" would have come by now
	got := strings.Join(events, " ")
	if got != "add:in update:in delete:in" {
		t.Fatalf("events %q", got)
	}
	if st := h.Status(); st.OutsideShard != 3 { // listed, updated, deleted
		t.Fatalf("outside %d, want 3", st.OutsideShard)
	}
}

func TestShardsSplitInformers(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), 0, WithoutCRDTracking())
	defer f.Shutdown()
	s0, _ := shard.Static(0, 2)
	s0b, _ := shard.ParseStatic("0/2")
	s1, _ := shard.Static(1, 2)
	a, b, c, all := f.ForResource(widgets, WithShard(s0)), f.ForResource(widgets, WithShard(s0b)), f.ForResource(widgets, WithShard(s1)), f.ForResource(widgets)
	if a.Informer() != b.Informer() {
		t.Fatal("equal shards must share an informer")
	}
	if a.Informer() == c.Informer() || a.Informer() == all.Informer() {
		t.Fatal("different shards must not share")
	}
	// The zero Shard undoes a factory default.
	g := NewSharedInformerFactory(fakeClient(), 0, WithoutCRDTracking(), WithDefaults(WithShard(s1)))
	defer g.Shutdown()
	sts := []string{g.ForResource(widgets).Status().Shard, g.ForResource(widgets, WithShard(shard.Shard{})).Status().Shard}
	sort.Strings(sts)
	if sts[0] != "" || sts[1] != s1.Selector() {
		t.Fatalf("shards %q", sts)
	}
}
