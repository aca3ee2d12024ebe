package spark_jobs.delta;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's LogStore for S3 through S3A, safe with several writers: a commit file is created with S3's
 * conditional put ({@code If-None-Match: *}, Hadoop 3.5's {@code fs.option.create.conditional.overwrite}),
 * so of two drivers committing the same version exactly one succeeds and the other gets
 * {@link java.nio.file.FileAlreadyExistsException}, which Delta turns into a conflict check and a retry.
 * delta-rs 1.x commits to S3 the same way, so Spark and delta-rs writers are safe together.
 *
 * Why the project has its own: Delta 4.4's S3 log stores are S3SingleDriverLogStore (one driver only)
 * and S3DynamoDBLogStore (a separate artifact, on the AWS SDK v1, that delta-rs 1.x no longer speaks).
 * A store without conditional puts fails the commit ("Conditional Writes Unavailable") instead of
 * risking a lost commit.
 */
public class S3ConditionalLogStore extends HadoopFileSystemLogStore {
    static final String CONDITIONAL_OVERWRITE = "fs.option.create.conditional.overwrite";

    public S3ConditionalLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(overwrite).recursive();
        if (!overwrite) {
            builder.must(CONDITIONAL_OVERWRITE, true);
        }
        try (FSDataOutputStream stream = builder.build()) {
            while (actions.hasNext()) {
                stream.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (IOException error) {
            if (!overwrite && alreadyExists(error)) {
                java.nio.file.FileAlreadyExistsException exists =
                    new java.nio.file.FileAlreadyExistsException(path.toString());
                exists.initCause(error);
                throw exists;
            }
            throw error;
        }
    }

    /** S3A reports a lost conditional create as FileAlreadyExistsException or as a 412 (precondition failed). */
    static boolean alreadyExists(Throwable error) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof org.apache.hadoop.fs.FileAlreadyExistsException
                    || cause instanceof java.nio.file.FileAlreadyExistsException) {
                return true;
            }
            String message = String.valueOf(cause.getMessage());
            if (message.contains("412") || message.contains("PreconditionFailed")
                    || message.contains("pre-conditions you specified did not hold")) {
                return true;
            }
        }
        return false;
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // an S3 object appears whole when its upload completes, or not at all
    }
}
