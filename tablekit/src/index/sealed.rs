//! Reads through an index on an encrypted field: by an equal value alone,
//! found by its keyed hash under the table's index key.

use futures::stream::{BoxStream, StreamExt, TryStreamExt};

use super::{IndexPage, IndexReader, Sealed, Unique};
use crate::error::{Call, Result};
use crate::key::KeyTuple;
use crate::schema::{self, KeyArg, TableEntity};
use crate::table::{Cursor, Loaded};

impl<T, V, U, Q> IndexReader<T, Sealed<V>, U, Q>
where
    T: TableEntity,
    V: KeyTuple + 'static,
    U: 'static,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// Every entity whose value is `value`, in RowKey order (at most one
    /// for a unique index). The value is hashed in the process; the store
    /// sees its hash alone.
    pub fn find(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> BoxStream<'static, Result<Q>> {
        let pk = schema::encode_partition_key::<T>(&pk);
        let encoded = self.encoded(value);
        let reader = self.clone();
        futures::stream::once(async move {
            let (start, end) = reader.key_bounds(reader.hashed(&encoded).await?);
            Ok::<_, crate::error::Error>(reader.rows(pk?, start, end))
        })
        .try_flatten()
        .boxed()
    }

    /// [`find`](Self::find) a page at a time: at most `n` entities (up to
    /// 1,000), after `after` (the `next` of the page before).
    pub fn find_page(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
        n: usize,
        after: Option<&Cursor>,
    ) -> Call<'_, IndexPage<Q>> {
        let pk = schema::encode_partition_key::<T>(&pk);
        let encoded = self.encoded(value);
        let after = after.cloned();
        Box::pin(async move {
            let bounds = self.key_bounds(self.hashed(&encoded).await?);
            self.page(pk?, bounds, n, after.as_ref()).await
        })
    }

    /// `value` laid out as a plain index's RowKey would hold it: what is
    /// hashed.
    fn encoded(&self, value: impl KeyArg<V>) -> String {
        let mut encoded = String::new();
        value.write_laid_out(&self.def.layout, &mut encoded);
        encoded
    }

    /// The start of the RowKeys of the value laid out as `encoded`: the
    /// index's tag, then the hash.
    async fn hashed(&self, encoded: &str) -> Result<String> {
        let hash = self.table.index_key().await?;
        Ok(schema::hashed(&self.def.prefix(), encoded, &hash))
    }
}

impl<T, V, Q> IndexReader<T, Sealed<V>, Unique, Q>
where
    T: TableEntity,
    V: KeyTuple + 'static,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// The entity whose value is `value`, or `None`: one point read when
    /// the index row holds every field `Q` needs, two otherwise.
    pub fn get(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> Call<'_, Option<Q>> {
        let pk = schema::encode_partition_key::<T>(&pk);
        let encoded = self.encoded(value);
        Box::pin(async move { self.get_at((pk?, self.hashed(&encoded).await?)).await })
    }

    /// The entity whose value is `value`, read from its own row with the
    /// ETag that guards a write through it: two point reads.
    pub fn get_loaded(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> Call<'_, Option<Loaded<T>>> {
        let pk = schema::encode_partition_key::<T>(&pk);
        let encoded = self.encoded(value);
        Box::pin(async move { self.loaded_at((pk?, self.hashed(&encoded).await?)).await })
    }
}
