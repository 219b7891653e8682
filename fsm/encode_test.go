package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// fill sets every field of m, at every depth below it (to depth levels),
// each string to s: one element in each list, one entry in each map; of
// a oneof, only the field op (nil below the top: the Command's op is the
// only oneof in the log's messages, and fill would skip any other).
func fill(m protoreflect.Message, s string, op protoreflect.FieldDescriptor, depth int) {
	if depth == 0 {
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && fd != op {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Set(scalar(fd.MapKey(), s).MapKey(), element(mp.NewValue, fd.MapValue(), s, depth))
		case fd.IsList():
			l := m.Mutable(fd).List()
			l.Append(element(l.NewElement, fd, s, depth))
		case fd.Message() != nil:
			fill(m.Mutable(fd).Message(), s, nil, depth-1)
		default:
			m.Set(fd, scalar(fd, s))
		}
	}
}

// element is a list element or map value of field fd, filled.
func element(newValue func() protoreflect.Value, fd protoreflect.FieldDescriptor, s string, depth int) protoreflect.Value {
	if fd.Message() == nil {
		return scalar(fd, s)
	}
	v := newValue()
	fill(v.Message(), s, nil, depth-1)
	return v
}

// scalar is a non-zero value of a scalar field (s for a string).
func scalar(fd protoreflect.FieldDescriptor, s string) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(s))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1_764_700_000_000_000_007)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(7)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(7)
	}
	panic("fill: unhandled kind " + fd.Kind().String())
}

// everyOp is one command per op of the Command's oneof, every field of it
// (and the command's grants) filled with s.
func everyOp(s string) map[string]*fsmpb.Command {
	out := map[string]*fsmpb.Command{}
	md := (&fsmpb.Command{}).ProtoReflect().Descriptor()
	ops := md.Oneofs().ByName("op").Fields()
	for i := range ops.Len() {
		c := &fsmpb.Command{}
		fill(c.ProtoReflect(), s, ops.Get(i), 4)
		out[string(ops.Get(i).Name())] = c
	}
	return out
}

// TestEncodeRefusesInvalidUTF8EverywhereInEveryOp: whichever op, whichever
// string field (at any depth: grants, lists, map keys and values), a
// string that is not UTF-8 is refused, so no log entry holds one (Decode
// does not check; TestEncodeRefusesInvalidUTF8 has two cases by hand).
func TestEncodeRefusesInvalidUTF8EverywhereInEveryOp(t *testing.T) {
	g := &fsmpb.Grant{}
	fill(g.ProtoReflect(), "ok", nil, 3)
	strings, grantStrings := 0, countStrings(g.ProtoReflect())
	ops := everyOp("ok")
	for op, c := range ops {
		if data, err := Encode(c); err != nil {
			t.Fatalf("%s: the command before any string is spoiled: %v (%d bytes)", op, err, len(data))
		}
		n := countStrings(c.ProtoReflect())
		opField := c.ProtoReflect().WhichOneof(c.ProtoReflect().Descriptor().Oneofs().ByName("op"))
		if hasStrings(opField.Message(), 3) && n <= grantStrings {
			t.Fatalf("%s: %d strings, none beyond its grants' %d: the fill is broken", op, n, grantStrings)
		}
		for i := range n {
			bad := proto.Clone(c).(*fsmpb.Command)
			if !spoil(bad.ProtoReflect(), i) {
				t.Fatalf("%s: string %d of %d not found in a clone", op, i, n)
			}
			strings++
			if data, err := Encode(bad); err == nil {
				t.Errorf("%s, string %d: Encode accepted a string that is not UTF-8 (%d bytes)", op, i, len(data))
			}
		}
	}
	if strings < len(ops)*grantStrings {
		t.Fatalf("only %d strings found in %d commands: the fill or the walk is broken", strings, len(ops))
	}
}

// hasStrings: a message of type md has a string field (to depth levels).
func hasStrings(md protoreflect.MessageDescriptor, depth int) bool {
	if md == nil || depth == 0 {
		return false
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			if fd.MapKey().Kind() == protoreflect.StringKind || fd.MapValue().Kind() == protoreflect.StringKind || hasStrings(fd.MapValue().Message(), depth-1) {
				return true
			}
			continue
		}
		if fd.Kind() == protoreflect.StringKind || hasStrings(fd.Message(), depth-1) {
			return true
		}
	}
	return false
}

// countStrings is how many strings walkStrings finds in m.
func countStrings(m protoreflect.Message) int {
	n := 0
	walkStrings(m, func(func()) bool { n++; return true })
	return n
}

// spoil makes the k-th string of m (walk order) invalid UTF-8.
func spoil(m protoreflect.Message, k int) bool {
	done := false
	walkStrings(m, func(bad func()) bool {
		if k == 0 {
			bad()
			done = true
			return false
		}
		k--
		return true
	})
	return done
}

// walkStrings calls f for every string in m (fields in declaration order,
// one list element or map key or value at a time), with a function that
// appends an invalid UTF-8 byte to that string, until f returns false.
func walkStrings(m protoreflect.Message, f func(bad func()) bool) bool {
	badString := func(v protoreflect.Value) protoreflect.Value { return protoreflect.ValueOfString(v.String() + "\xff") }
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			for _, k := range keys {
				if fd.MapKey().Kind() == protoreflect.StringKind && !f(func() {
					v := mp.Get(k)
					mp.Clear(k)
					mp.Set(badString(k.Value()).MapKey(), v)
				}) {
					return false
				}
				switch fd.MapValue().Kind() {
				case protoreflect.StringKind:
					if !f(func() { mp.Set(k, badString(mp.Get(k))) }) {
						return false
					}
				case protoreflect.MessageKind:
					if !walkStrings(mp.Mutable(k).Message(), f) {
						return false
					}
				}
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range l.Len() {
				switch fd.Kind() {
				case protoreflect.StringKind:
					if !f(func() { l.Set(j, badString(l.Get(j))) }) {
						return false
					}
				case protoreflect.MessageKind:
					if !walkStrings(l.Get(j).Message(), f) {
						return false
					}
				}
			}
		case fd.Kind() == protoreflect.StringKind:
			if !f(func() { m.Set(fd, badString(m.Get(fd))) }) {
				return false
			}
		case fd.Message() != nil:
			if !walkStrings(m.Mutable(fd).Message(), f) {
				return false
			}
		}
	}
	return true
}
