package controller

import (
	"fmt"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// handleOf turns what the factory returns into its concrete handle. It is
// the package's only type assertion on a factory result: once ForResource
// and ForName return *InformerHandle it reduces to a nil check.
func handleOf(g dynamicinformer.GenericInformer) (*dynamicinformer.InformerHandle, error) {
	h, ok := g.(*dynamicinformer.InformerHandle)
	if !ok || h == nil {
		return nil, fmt.Errorf("%w: %T", ErrNotHandle, g)
	}
	return h, nil
}
