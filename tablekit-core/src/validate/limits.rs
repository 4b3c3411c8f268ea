/// Most names in one page of a blob or queue listing (and the default).
pub const MAX_LIST_RESULTS: u32 = 5000;
/// Longest PartitionKey or RowKey, in UTF-16 code units (1 KiB).
pub const MAX_KEY_UTF16: usize = 512;
/// Most custom properties of one entity (255 less PartitionKey, RowKey, Timestamp).
pub const MAX_PROPERTIES: usize = 252;
/// Longest property name, in characters.
pub const MAX_PROPERTY_NAME: usize = 255;
/// Longest string value, in UTF-16 code units.
pub const MAX_STRING_UTF16: usize = 32_000;
/// Longest binary value, in bytes.
pub const MAX_BINARY_BYTES: usize = 64_000;
/// Largest entity by the service's size formula, in bytes (1 MiB).
pub const MAX_ENTITY_SIZE: usize = 1024 * 1024;
/// Most operations in one entity group transaction.
pub const MAX_BATCH_OPERATIONS: usize = 100;
/// Largest batch payload, in bytes (4 MiB).
pub const MAX_BATCH_PAYLOAD: usize = 4 * 1024 * 1024;
/// Bytes counted for each batch operation's MIME part headers and request line,
/// on top of its JSON body and keys.
pub const BATCH_OPERATION_OVERHEAD: usize = 512;
/// Most comparisons in one `$filter`.
pub const MAX_FILTER_COMPARISONS: usize = 15;
/// Deepest nesting of one `$filter` (a comparison is depth 1; each `and`,
/// `or`, `not` or pair of parentheses around it adds one). Fifteen
/// comparisons never need more; the limit keeps a hostile filter from
/// exhausting the stack of whatever parses or evaluates it.
pub const MAX_FILTER_DEPTH: usize = 64;
/// Most entities in one page of results.
pub const MAX_PAGE_SIZE: u32 = 1000;
/// The most messages one get or peek of a queue returns.
pub const MAX_MESSAGES_PER_GET: u32 = 32;
/// The longest text of a queue message, in bytes of UTF-8.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// The longest visibility timeout or delay of a queue message: 7 days.
pub const MAX_VISIBILITY: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// How long a queue message lives when its put names no time to live:
/// 7 days.
pub const DEFAULT_TTL: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
