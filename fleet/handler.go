package fleet

// Handler receives the events of one resource from every cluster of a
// fleet, each naming its cluster (Resource.AddEventHandler).
//
// Contract:
//
//   - Per cluster, calls are sequential and in that cluster's order: the
//     order of its informer (client-go's: the order the API server sent,
//     one object's events never reordered). A handler that applies them
//     holds exactly what the cluster's cache holds, as client-go's handlers
//     do.
//   - Across clusters there is no order and no coordination: calls for
//     different clusters may run at the same time, on different
//     goroutines. A Handler must be safe for concurrent use. A slow call
//     delays only its own cluster's later calls to this handler.
//   - obj, oldObj and newObj are shared with the fleet's cache, its other
//     handlers and its listers: never modify them (DeepCopy first). OnDelete
//     may be given a toolscache.DeletedFinalStateUnknown, as client-go's
//     handlers are.
//   - A cluster that joins (or a handler added later) gets an OnAdd per
//     object, isInInitialList true for its first list. A cluster that leaves
//     gets an OnDelete per object its cache held, then nothing more. A
//     cluster whose clients are rebuilt (credentials rotated) gets only
//     the difference between its cache before and after: an OnUpdate
//     per object whose resourceVersion changed, an OnAdd per new object,
//     an OnDelete per object gone; nothing for the others.
//   - A panic in a call is recovered and counted in that cluster's
//     informer Status (HandlerPanics), as for a factory's handlers; the
//     deletes the fleet delivers itself (a cluster that left, the old
//     objects after a rebuild) are recovered without being counted.
type Handler interface {
	OnAdd(cluster string, obj any, isInInitialList bool)
	OnUpdate(cluster string, oldObj, newObj any)
	OnDelete(cluster string, obj any)
}

// HandlerFuncs is a Handler whose nil fields ignore their events.
type HandlerFuncs struct {
	AddFunc    func(cluster string, obj any, isInInitialList bool)
	UpdateFunc func(cluster string, oldObj, newObj any)
	DeleteFunc func(cluster string, obj any)
}

// OnAdd calls AddFunc if it is set.
func (f HandlerFuncs) OnAdd(cluster string, obj any, isInInitialList bool) {
	if f.AddFunc != nil {
		f.AddFunc(cluster, obj, isInInitialList)
	}
}

// OnUpdate calls UpdateFunc if it is set.
func (f HandlerFuncs) OnUpdate(cluster string, oldObj, newObj any) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(cluster, oldObj, newObj)
	}
}

// OnDelete calls DeleteFunc if it is set.
func (f HandlerFuncs) OnDelete(cluster string, obj any) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(cluster, obj)
	}
}
