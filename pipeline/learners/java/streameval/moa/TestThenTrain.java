package streameval.moa;

import com.yahoo.labs.samoa.instances.Instance;
import moa.classifiers.Classifier;

/**
 * Test-then-train of one MOA learner over a block of rows, in one call from Python.
 *
 * <p>The per-instance path of {@code streameval.pipeline.learners.moa} crosses from
 * Python into Java four times per instance (write the row, ask the votes, set the class,
 * train); this loop makes the same learner calls in the same order, on the same instance
 * object, for a whole block of rows.
 */
public final class TestThenTrain {
    private TestThenTrain() {}

    /**
     * For each row {@code i < n} of {@code rows} ({@code width} values each, the class
     * value last): the row goes into {@code buffer} (the values array of
     * {@code instance}) with its class missing, the learner's votes for it are written
     * to {@code votes[i*k .. i*k+k)} (votes past {@code k} dropped, missing ones 0),
     * then its class is set and the learner trains on it.
     *
     * @return the rows done: {@code n}, or the row on which the learner threw, its
     *     exception in {@code failure[0]} and {@code step[0]} 0 (votes) or 1 (training)
     */
    public static int run(
            Classifier learner, Instance instance, double[] buffer, double[] rows,
            int width, int n, int k, double[] votes, Throwable[] failure, int[] step) {
        int last = width - 1;
        for (int i = 0; i < n; i++) {
            System.arraycopy(rows, i * width, buffer, 0, last);
            buffer[last] = Double.NaN;
            double[] v;
            try {
                v = learner.getVotesForInstance(instance);
            } catch (Throwable e) {
                failure[0] = e;
                step[0] = 0;
                return i;
            }
            int m = Math.min(v.length, k);
            System.arraycopy(v, 0, votes, i * k, m);
            buffer[last] = rows[i * width + last];
            try {
                learner.trainOnInstance(instance);
            } catch (Throwable e) {
                failure[0] = e;
                step[0] = 1;
                return i;
            }
        }
        return n;
    }
}
