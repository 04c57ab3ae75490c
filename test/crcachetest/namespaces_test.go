package crcachetest

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerkit/informerkit/test/controlplane"
)

// TestCRNamespaceAllBesideNamedNamespace: DefaultNamespaces with
// NamespaceAll beside a namespace that has a Config of its own (a label
// selector) caches, in that namespace, only what its Config selects, and
// everything elsewhere — as controller-runtime's cache does — for every
// construction (Go's map order is random). Before: the first key met
// decided; 19 of 20 constructions were accepted and listed the object
// the namespace's selector excludes, 1 was refused.
func TestCRNamespaceAllBesideNamedNamespace(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	a, b := newNamespace(t, ctx), newNamespace(t, ctx)
	createConfigMap(t, ctx, a, "picked", map[string]string{"app": "x"})
	createConfigMap(t, ctx, a, "excluded", nil)
	createConfigMap(t, ctx, b, "other", nil)
	opts := crcache.Options{DefaultNamespaces: map[string]crcache.Config{
		crcache.AllNamespaces: {},
		a:                     {LabelSelector: labels.SelectorFromSet(labels.Set{"app": "x"})},
	}}
	for i := 0; i < 5; i++ {
		p := newPair(t, ctx, cp.Config(), opts, nil)
		var lists [2]map[string]bool
		for j, c := range []crcache.Cache{p.ik, p.cr} {
			lists[j] = map[string]bool{}
			for _, ns := range []string{a, b} {
				var l corev1.ConfigMapList
				if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
					t.Fatalf("construction %d, cache %d: List in %s: %v", i, j, ns, err)
				}
				for _, cm := range l.Items {
					lists[j][cm.Namespace+"/"+cm.Name] = true
				}
			}
			// Over all namespaces, as in each: the excluded object is not there.
			var all corev1.ConfigMapList
			if err := c.List(ctx, &all); err != nil {
				t.Fatal(err)
			}
			for _, cm := range all.Items {
				if cm.Namespace == a && cm.Name == "excluded" {
					t.Fatalf("construction %d, cache %d: the object %s's Config excludes is listed over all namespaces", i, j, a)
				}
			}
		}
		want := map[string]bool{a + "/picked": true, b + "/other": true}
		if !reflect.DeepEqual(lists[0], want) || !reflect.DeepEqual(lists[1], want) {
			t.Fatalf("construction %d: informerkit %v, controller-runtime %v; want %v", i, lists[0], lists[1], want)
		}
	}
}
