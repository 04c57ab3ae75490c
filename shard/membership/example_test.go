package membership_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/informerkit/informerkit/shard/membership"
)

// A replica joins its group; alone, it holds the whole hash space. In a
// program, give the Member to informers with
// dynamicinformer.WithShardSource(m) and call m.Leave(ctx) on shutdown.
func ExampleJoin() {
	client := fake.NewClientset() // kubernetes.NewForConfig(cfg) in a program
	ctx := context.Background()
	m, err := membership.Join(ctx, client, membership.Options{
		Namespace: "default", Group: "crd-watchers", Identity: "replica-0",
	})
	if err != nil {
		panic(err)
	}
	s, _ := m.Current()
	fmt.Printf("members %v, share %.2f\n", m.Members(), s.Size())
	if err := m.Leave(ctx); err != nil {
		panic(err)
	}
	// Output: members [replica-0], share 1.00
}
