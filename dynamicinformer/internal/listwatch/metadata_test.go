package listwatch

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

func fullObject(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": name, "namespace": "a", "resourceVersion": rv, "labels": map[string]interface{}{"k": "v"}},
		"spec":     map[string]interface{}{"size": int64(1)},
	}}
	return u
}

// MetadataOnly hands on lists and watch events of metadata only, as the
// metadata client would, passes error events unchanged, and its
// forwarding goroutine ends on Stop even while nobody reads.
func TestMetadataOnly(t *testing.T) {
	defer leaks(t)
	fw := watch.NewFake()
	in := Funcs{
		List: func(context.Context, string, metav1.ListOptions) (runtime.Object, error) {
			l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
			l.SetResourceVersion("10")
			l.SetContinue("next")
			l.Items = []unstructured.Unstructured{*fullObject("w1", "9")}
			return l, nil
		},
		Watch: func(context.Context, string, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	md := MetadataOnly(in)
	obj, err := md.List(context.Background(), "a", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "10", Continue: "next"},
		Items: []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "a", ResourceVersion: "9", Labels: map[string]string{"k": "v"}}}}}
	if !reflect.DeepEqual(obj, want) {
		t.Fatalf("list %#v, want %#v", obj, want)
	}

	w, err := md.Watch(context.Background(), "a", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		fw.Add(fullObject("w2", "11"))
		fw.Error(status)
		fw.Modify(fullObject("w2", "12"))
	}()
	next := func() watch.Event {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return watch.Event{}
	}
	if ev := next(); ev.Type != watch.Added || !reflect.DeepEqual(ev.Object, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "w2", Namespace: "a", ResourceVersion: "11", Labels: map[string]string{"k": "v"}}}) {
		t.Fatalf("added event %#v", ev)
	}
	if ev := next(); ev.Type != watch.Error || ev.Object != status {
		t.Fatalf("error event %#v, want the Status unchanged", ev)
	}
	// The modify event is taken by the forwarder and waits for a reader
	// that never comes: Stop ends it anyway.
	<-sent
	w.Stop()
	w.Stop()
	for range w.ResultChan() {
	}
}
