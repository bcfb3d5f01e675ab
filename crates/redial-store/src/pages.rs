//! Reading every job a filter covers, a page at a time: [`JobPages`], the one loop over
//! [`Store::job_list`]'s cursor that bulk operations, exports and tools share.

use crate::{Job, JobFilter, JobListParams, Store, StoreResult};

/// The pages of the jobs `filter` covers, oldest first, `limit` jobs at most each; memory
/// stays one page whatever the count.
///
/// ```ignore
/// let mut pages = JobPages::new(store, filter, 500);
/// while let Some(jobs) = pages.next().await? { /* ... */ }
/// ```
pub struct JobPages<'a> {
    store: &'a dyn Store,
    filter: JobFilter,
    limit: u32,
    after: Option<i64>,
    done: bool,
}

impl std::fmt::Debug for JobPages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobPages")
            .field("filter", &self.filter)
            .field("limit", &self.limit)
            .field("after", &self.after)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<'a> JobPages<'a> {
    pub fn new(store: &'a dyn Store, filter: JobFilter, limit: u32) -> Self {
        JobPages {
            store,
            filter,
            limit,
            after: None,
            done: false,
        }
    }

    /// The next page, or `None` once every page was read (a page may be empty only when
    /// nothing matched).
    pub async fn next(&mut self) -> StoreResult<Option<Vec<Job>>> {
        if self.done {
            return Ok(None);
        }
        let page = self
            .store
            .job_list(JobListParams {
                filter: self.filter.clone(),
                after: self.after,
                limit: self.limit,
            })
            .await?;
        match page.next {
            Some(next) => self.after = Some(next),
            None => self.done = true,
        }
        Ok(Some(page.jobs))
    }

    /// Every job left, in one list.
    pub async fn all(mut self) -> StoreResult<Vec<Job>> {
        let mut jobs = Vec::new();
        while let Some(page) = self.next().await? {
            jobs.extend(page);
        }
        Ok(jobs)
    }
}
