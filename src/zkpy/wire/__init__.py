"""Sans-I/O wire layer: the jute codec, the 3.8 client protocol records, txn records and framing."""
