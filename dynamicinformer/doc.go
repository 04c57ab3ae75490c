// Package dynamicinformer is a GVR-keyed shared informer factory over the
// client-go dynamic client: one list+watch per resource however many
// consumers share it, per-resource options, reference-counted release, and
// informers that follow CustomResourceDefinitions installed and removed
// while the program runs.
package dynamicinformer
