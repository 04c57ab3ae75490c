package shard_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerkit/informerkit/shard"
)

// Replica 1 of 3: the selector the server is sent, and the client-side
// check of an object.
func ExampleStatic() {
	s, err := shard.Static(1, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Selector())

	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "web", UID: "080c2b1e-8f0a-4c55-9f6e-0d6c7c1b9a01"}}
	fmt.Printf("hash %#016x, in shard 1/3: %v\n", shard.Hash(string(obj.UID)), s.Contains(obj))
	// Output:
	// shardRange(object.metadata.uid, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')
	// hash 0xa8d3e07aa89306bf, in shard 1/3: true
}

// Several ranges of one field are joined with "||"; touching ranges are
// merged.
func ExampleNew() {
	s, err := shard.New(shard.UID,
		shard.Range{Start: 0xc000000000000000, Last: 0xffffffffffffffff},
		shard.Range{Start: 0, Last: 0x1fffffffffffffff},
		shard.Range{Start: 0x2000000000000000, Last: 0x3fffffffffffffff})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Selector())
	fmt.Printf("%.2f of the space\n", s.Size())
	// Output:
	// shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
	// 0.50 of the space
}
