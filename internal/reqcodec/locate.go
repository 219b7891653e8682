package reqcodec

import (
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxDepth bounds the nesting locate follows (the API's requests are flat
// but for map entries); deeper, the caller reports the runtime's error.
const maxDepth = 32

// locate walks the wire bytes b of a message md and returns the first
// fault it finds, as "<field>: <what>" (the API's form of an
// InvalidArgument message), or nil when it finds none. Faults: bytes that
// do not parse (a truncated varint or length, a bad tag), a known field
// with another wire type than its kind, and a string (proto3) that is not
// UTF-8.
func locate(md protoreflect.MessageDescriptor, b []byte, prefix string, depth int) error {
	if depth > maxDepth {
		return nil
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%s: malformed protobuf: %v", orRequest(prefix), protowire.ParseError(n))
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		name := fieldName(prefix, fd, num)
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%s: malformed protobuf: %v", name, protowire.ParseError(n))
		}
		v := b[:n]
		b = b[n:]
		if fd == nil {
			continue // a field of a newer schema: kept, ignored
		}
		if !wireTypeFits(fd, typ) {
			return fmt.Errorf("%s: malformed protobuf: wire type %s, want %s for a %s field", name, typeName(typ), typeName(wireTypeOf(fd.Kind())), fd.Kind())
		}
		if typ != protowire.BytesType {
			continue
		}
		payload, _ := protowire.ConsumeBytes(v)
		switch {
		case fd.IsMap():
			if err := locateMapEntry(fd, payload, name, depth); err != nil {
				return err
			}
		case fd.IsList() && isScalar(fd.Kind()):
			if err := locatePacked(fd, payload, name); err != nil {
				return err
			}
		case fd.Kind() == protoreflect.StringKind:
			if checksUTF8(fd) && !utf8.Valid(payload) {
				return fmt.Errorf("%s: must be valid UTF-8", name)
			}
		case fd.Kind() == protoreflect.MessageKind:
			if err := locate(fd.Message(), payload, name, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// locateMapEntry checks one map entry: its key and value, named
// field (a key at fault) or field["key"] (a value at fault).
func locateMapEntry(fd protoreflect.FieldDescriptor, b []byte, name string, depth int) error {
	key := ""
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%s: malformed protobuf: %v", name, protowire.ParseError(n))
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%s: malformed protobuf: %v", name, protowire.ParseError(n))
		}
		v := b[:n]
		b = b[n:]
		var sub protoreflect.FieldDescriptor
		what := "a key"
		switch num {
		case 1:
			sub = fd.MapKey()
		case 2:
			sub, what = fd.MapValue(), "a value"
		default:
			continue
		}
		at := name
		if num == 2 && key != "" {
			at = name + "[" + strconv.Quote(key) + "]"
		}
		if !wireTypeFits(sub, typ) {
			return fmt.Errorf("%s: malformed protobuf: %s has wire type %s, want %s", at, what, typeName(typ), typeName(wireTypeOf(sub.Kind())))
		}
		if typ != protowire.BytesType {
			continue
		}
		payload, _ := protowire.ConsumeBytes(v)
		switch sub.Kind() {
		case protoreflect.StringKind:
			if checksUTF8(sub) && !utf8.Valid(payload) {
				if num == 1 {
					return fmt.Errorf("%s: keys must be valid UTF-8", name)
				}
				return fmt.Errorf("%s: values must be valid UTF-8", at)
			}
			if num == 1 {
				key = string(payload)
			}
		case protoreflect.MessageKind:
			if err := locate(sub.Message(), payload, at, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// locatePacked checks a packed repeated scalar's values.
func locatePacked(fd protoreflect.FieldDescriptor, b []byte, name string) error {
	typ := wireTypeOf(fd.Kind())
	for len(b) > 0 {
		var n int
		switch typ {
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(b)
		case protowire.Fixed64Type:
			_, n = protowire.ConsumeFixed64(b)
		default:
			return nil
		}
		if n < 0 {
			return fmt.Errorf("%s: malformed protobuf: %v", name, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// hasUnknown reports whether m or a message inside it kept unknown fields.
func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	if !nests(m.Descriptor()) {
		return false // the API's requests: no Range on the hot path
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					found = hasUnknown(mv.Message())
					return !found
				})
			}
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && !found; i++ {
				found = hasUnknown(l.Get(i).Message())
			}
		default:
			found = hasUnknown(v.Message())
		}
		return !found
	})
	return found
}

// nested caches, per message type, whether it has message-typed fields
// (map values included): only those need a walk for unknown fields.
var nested sync.Map // protoreflect.FullName -> bool

func nests(md protoreflect.MessageDescriptor) bool {
	if v, ok := nested.Load(md.FullName()); ok {
		return v.(bool)
	}
	out := false
	fs := md.Fields()
	for i := 0; i < fs.Len() && !out; i++ {
		fd := fs.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		out = fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
	}
	nested.Store(md.FullName(), out)
	return out
}

func orRequest(prefix string) string {
	if prefix == "" {
		return "request"
	}
	return prefix
}

func fieldName(prefix string, fd protoreflect.FieldDescriptor, num protowire.Number) string {
	name := "field " + strconv.Itoa(int(num))
	if fd != nil {
		name = string(fd.Name())
	} else if prefix == "" {
		return "request: " + name
	}
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// checksUTF8: the runtime refuses invalid UTF-8 in proto3 strings (and
// in editions' with utf8 validation, the default).
func checksUTF8(fd protoreflect.FieldDescriptor) bool {
	return fd.ParentFile() == nil || fd.ParentFile().Syntax() != protoreflect.Proto2
}

func isScalar(k protoreflect.Kind) bool {
	t := wireTypeOf(k)
	return t == protowire.VarintType || t == protowire.Fixed32Type || t == protowire.Fixed64Type
}

func wireTypeOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType // string, bytes, message
}

// wireTypeFits: the kind's own wire type, or (a repeated scalar) packed.
func wireTypeFits(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	want := wireTypeOf(fd.Kind())
	return typ == want || (fd.IsList() && isScalar(fd.Kind()) && typ == protowire.BytesType)
}

func typeName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "length-delimited"
	case protowire.StartGroupType:
		return "start-group"
	case protowire.EndGroupType:
		return "end-group"
	}
	return strconv.Itoa(int(t))
}
