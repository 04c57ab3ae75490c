package persist_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/informerkit/informerkit/internal/persist"
)

func Example() {
	path, _ := os.MkdirTemp("", "persist")
	defer os.RemoveAll(path)
	dir, err := persist.Open(path) // locked until Close
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dir.Close()
	id := persist.Identity{Spec: "configmaps.v1 ns=a", Cluster: "kube-system-uid"}

	// A running informer: a fresh snapshot, then a journal of changes.
	w, _ := dir.Create("configmaps", id, persist.State{})
	w.Put("a/one", "10", []byte(`{"metadata":{"name":"one"}}`))
	// An object held, encoded when the journal is next written (its
	// Sync, the fold, Close): the caller must not change it meanwhile.
	two := map[string]any{"metadata": map[string]any{"name": "two"}}
	w.PutObject("a/two", "11", two, func(dst []byte, obj any) ([]byte, error) {
		b, err := json.Marshal(obj)
		return append(dst, b...), err
	})
	w.Delete("a/one", "12")
	w.Close() // folds the journal into the snapshot

	// The next start.
	st, _, err := dir.Load("configmaps", id)
	fmt.Println(len(st.Objects), st.Objects[0].Key, "at", st.RV, err)
	// Another cluster's state is not used (and is removed).
	_, _, err = dir.Load("configmaps", persist.Identity{Spec: id.Spec, Cluster: "other"})
	fmt.Println(err)
	// Output:
	// 1 a/two at 12 <nil>
	// persist: stored cache does not match: another cluster
}
