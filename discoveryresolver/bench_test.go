package discoveryresolver

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// BenchmarkResolveCached measures resolving names the snapshot knows: no
// network, one map lookup, one allocation for the copy of the Resource's
// slices.
func BenchmarkResolveCached(b *testing.B) {
	r := New(newFake(cluster()...))
	ctx := context.Background()
	if err := r.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	for _, ref := range []string{"pods", "po", "Deployment.apps", "deployments.v1.apps", "ct", "CronTab.v1beta1.stable.example.com", "DEPLOYMENTS.APPS"} {
		b.Run(ref, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Resolve(ctx, ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("parallel/Deployment.apps", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.Resolve(ctx, "Deployment.apps"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	b.Run("ResolveGVR", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.ResolveGVR(ctx, gvr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Lookup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := r.Lookup(gvr); !ok {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkMiss measures a miss without the minimum refresh interval: the
// lookup, the discovery round it runs (against an in-memory fake: snapshot
// building, no network) and the error value. With the interval, a miss
// costs at most one such round per interval, shared by every miss waiting.
func BenchmarkMiss(b *testing.B) {
	r := New(newFake(cluster()...), WithMinRefreshInterval(0))
	ctx := context.Background()
	if err := r.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Resolve(ctx, "nosuchthing"); err == nil {
			b.Fatal("found")
		}
	}
}

// BenchmarkBuildSnapshot measures indexing one discovery document (done once
// per discovery round).
func BenchmarkBuildSnapshot(b *testing.B) {
	fd := newFake(cluster()...)
	groups, lists, _ := fd.ServerGroupsAndResources()
	b.ReportAllocs()
	for b.Loop() {
		buildSnapshot(discoveryData{groups: groups, lists: lists}, nil, false)
	}
}
