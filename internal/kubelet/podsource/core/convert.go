package core

import (
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
)

// FromV1 returns the internal form of a v1 Pod. Upstream converts a v1 Pod
// by copying memory (the two have the same layout); this copies field by
// field, in order, which gives the same value and fails loudly (a panic, a
// bug) if a future k8s.io/api ever breaks the correspondence; a test walks
// the two types to keep them in step.
func FromV1(in *v1.Pod) *Pod {
	out := &Pod{}
	out.TypeMeta = in.TypeMeta
	out.ObjectMeta = *in.ObjectMeta.DeepCopy()
	copyValue(reflect.ValueOf(&out.Spec).Elem(), reflect.ValueOf(in.Spec))
	copyValue(reflect.ValueOf(&out.Status).Elem(), reflect.ValueOf(in.Status))
	return out
}

// copyValue copies src into dst, two values of types of the same shape.
func copyValue(dst, src reflect.Value) {
	if dst.Type() == src.Type() {
		dst.Set(deepCopy(src))
		return
	}
	switch dst.Kind() {
	case reflect.Struct:
		if dst.NumField() != src.NumField() {
			panic(fmt.Sprintf("core: %s has %d fields, %s %d", dst.Type(), dst.NumField(), src.Type(), src.NumField()))
		}
		for i := range dst.NumField() {
			copyValue(dst.Field(i), src.Field(i))
		}
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.New(dst.Type().Elem()))
		copyValue(dst.Elem(), src.Elem())
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.MakeSlice(dst.Type(), src.Len(), src.Len()))
		for i := range src.Len() {
			copyValue(dst.Index(i), src.Index(i))
		}
	case reflect.Map:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.MakeMapWithSize(dst.Type(), src.Len()))
		it := src.MapRange()
		for it.Next() {
			k := reflect.New(dst.Type().Key()).Elem()
			copyValue(k, it.Key())
			v := reflect.New(dst.Type().Elem()).Elem()
			copyValue(v, it.Value())
			dst.SetMapIndex(k, v)
		}
	default:
		dst.Set(src.Convert(dst.Type()))
	}
}

// deepCopy copies a value of a type outside this package (Quantity, Time,
// IntOrString, ...) so the internal Pod shares nothing with the v1 one.
func deepCopy(v reflect.Value) reflect.Value {
	if m := v.MethodByName("DeepCopy"); m.IsValid() && m.Type().NumIn() == 0 && m.Type().NumOut() == 1 && m.Type().Out(0) == v.Type() {
		return m.Call(nil)[0]
	}
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out.Set(reflect.New(v.Type().Elem()))
			out.Elem().Set(deepCopy(v.Elem()))
		}
		return out
	case reflect.Slice:
		if !v.IsNil() {
			out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
			for i := range v.Len() {
				out.Index(i).Set(deepCopy(v.Index(i)))
			}
		}
		return out
	case reflect.Map:
		if !v.IsNil() {
			out.Set(reflect.MakeMapWithSize(v.Type(), v.Len()))
			it := v.MapRange()
			for it.Next() {
				out.SetMapIndex(it.Key(), deepCopy(it.Value()))
			}
		}
		return out
	}
	return v
}
