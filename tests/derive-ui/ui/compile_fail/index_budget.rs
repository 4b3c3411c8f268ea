use tablekit::TableEntity;

// Each index adds up to two operations (delete the old row, write the new
// one) to the entity's transaction of at most 100.
#[derive(TableEntity)]
#[tablekit(kind = "WIDE")]
struct Indexed {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    #[tablekit(index = "i0")]
    f0: u32,
    #[tablekit(index = "i1")]
    f1: u32,
    #[tablekit(index = "i2")]
    f2: u32,
    #[tablekit(index = "i3")]
    f3: u32,
    #[tablekit(index = "i4")]
    f4: u32,
    #[tablekit(index = "i5")]
    f5: u32,
    #[tablekit(index = "i6")]
    f6: u32,
    #[tablekit(index = "i7")]
    f7: u32,
    #[tablekit(index = "i8")]
    f8: u32,
    #[tablekit(index = "i9")]
    f9: u32,
    #[tablekit(index = "i10")]
    f10: u32,
    #[tablekit(index = "i11")]
    f11: u32,
    #[tablekit(index = "i12")]
    f12: u32,
    #[tablekit(index = "i13")]
    f13: u32,
    #[tablekit(index = "i14")]
    f14: u32,
    #[tablekit(index = "i15")]
    f15: u32,
    #[tablekit(index = "i16")]
    f16: u32,
    #[tablekit(index = "i17")]
    f17: u32,
    #[tablekit(index = "i18")]
    f18: u32,
    #[tablekit(index = "i19")]
    f19: u32,
    #[tablekit(index = "i20")]
    f20: u32,
    #[tablekit(index = "i21")]
    f21: u32,
    #[tablekit(index = "i22")]
    f22: u32,
    #[tablekit(index = "i23")]
    f23: u32,
    #[tablekit(index = "i24")]
    f24: u32,
    #[tablekit(index = "i25")]
    f25: u32,
    #[tablekit(index = "i26")]
    f26: u32,
    #[tablekit(index = "i27")]
    f27: u32,
    #[tablekit(index = "i28")]
    f28: u32,
    #[tablekit(index = "i29")]
    f29: u32,
    #[tablekit(index = "i30")]
    f30: u32,
    #[tablekit(index = "i31")]
    f31: u32,
    #[tablekit(index = "i32")]
    f32: u32,
    #[tablekit(index = "i33")]
    f33: u32,
    #[tablekit(index = "i34")]
    f34: u32,
    #[tablekit(index = "i35")]
    f35: u32,
    #[tablekit(index = "i36")]
    f36: u32,
    #[tablekit(index = "i37")]
    f37: u32,
    #[tablekit(index = "i38")]
    f38: u32,
    #[tablekit(index = "i39")]
    f39: u32,
    #[tablekit(index = "i40")]
    f40: u32,
    #[tablekit(index = "i41")]
    f41: u32,
    #[tablekit(index = "i42")]
    f42: u32,
    #[tablekit(index = "i43")]
    f43: u32,
    #[tablekit(index = "i44")]
    f44: u32,
    #[tablekit(index = "i45")]
    f45: u32,
    #[tablekit(index = "i46")]
    f46: u32,
    #[tablekit(index = "i47")]
    f47: u32,
    #[tablekit(index = "i48")]
    f48: u32,
    #[tablekit(index = "i49")]
    f49: u32,
}

fn main() {}
