package listwatch

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// MetadataOnly turns the list and watch requests of a dynamic client (in:
// *unstructured.UnstructuredList, watch events of
// *unstructured.Unstructured) into those of the metadata client: a
// *metav1.PartialObjectMetadataList, watch events of
// *metav1.PartialObjectMetadata, with the metadata the API server puts in
// them for a metadata-only request (meta.AsPartialObjectMetadata) and no
// TypeMeta, as client-go's metadata client returns them. The full
// objects are still sent and decoded; only their metadata is kept. Error
// events pass unchanged.
func MetadataOnly(in Funcs) Funcs {
	return Funcs{
		List: func(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := in.List(ctx, ns, opts)
			if err != nil {
				return nil, err
			}
			return metadataList(obj)
		},
		Watch: func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := in.Watch(ctx, ns, opts)
			if err != nil {
				return nil, err
			}
			return newMetadataWatch(w), nil
		},
	}
}

// metadataList is the PartialObjectMetadataList of an UnstructuredList.
func metadataList(obj runtime.Object) (runtime.Object, error) {
	l, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return nil, fmt.Errorf("metadata-only list through the dynamic client: got %T, want *unstructured.UnstructuredList", obj)
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{
		ResourceVersion:    l.GetResourceVersion(),
		Continue:           l.GetContinue(),
		RemainingItemCount: l.GetRemainingItemCount(),
	}}
	out.Items = make([]metav1.PartialObjectMetadata, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *asMetadata(&l.Items[i])
	}
	return out, nil
}

func asMetadata(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := meta.AsPartialObjectMetadata(u)
	m.TypeMeta = metav1.TypeMeta{}
	return m
}

// metadataWatch forwards a dynamic client's watch with each object
// reduced to its metadata. Its goroutine ends when the server watch's
// channel closes or Stop is called.
type metadataWatch struct {
	in     watch.Interface
	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func newMetadataWatch(in watch.Interface) *metadataWatch {
	w := &metadataWatch{in: in, result: make(chan watch.Event), stop: make(chan struct{})}
	go w.run()
	return w
}

func (w *metadataWatch) run() {
	defer close(w.result)
	for {
		select {
		case ev, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Error {
				ev.Object = asMetadata(u)
			}
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
		case <-w.stop:
			return
		}
	}
}

// ResultChan implements watch.Interface.
func (w *metadataWatch) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface: it stops the server watch and ends the
// forwarding goroutine. It may be called more than once.
func (w *metadataWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}
