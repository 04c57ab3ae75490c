// Package box makes interface values whose data lives where the caller
// says, instead of in an allocation of its own: the decoders put the
// string headers (and slice headers) of one object side by side in one
// allocation, which the object's interface values point into.
//
// This is the module's one use of the runtime's layout of an empty
// interface (a type word and a data pointer, as Go has laid it out since
// 1.4). A value made here is an ordinary interface value: comparing,
// type-switching and copying it work as for any other, and the garbage
// collector keeps the pointed-to memory alive through it.
package box

import "unsafe"

// eface is the layout of an empty interface value.
type eface struct {
	typ, data unsafe.Pointer
}

// typeOf returns the type word of v.
func typeOf(v interface{}) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType = typeOf("")
	sliceType  = typeOf([]interface{}{})
)

// String returns the interface value holding *p, pointing at *p. *p must
// never be written again: a string held by an interface is read-only to
// the runtime and to every reader, so sharing the header is safe.
func String(p *string) interface{} {
	v := eface{typ: stringType, data: unsafe.Pointer(p)}
	return *(*interface{})(unsafe.Pointer(&v))
}

// Slice returns the interface value holding *p, pointing at *p. *p (the
// slice header) must never be written again.
func Slice(p *[]interface{}) interface{} {
	v := eface{typ: sliceType, data: unsafe.Pointer(p)}
	return *(*interface{})(unsafe.Pointer(&v))
}
